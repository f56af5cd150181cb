package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
)

type deleteTool struct{ ws workspace }

func (*deleteTool) Name() string { return "delete" }

func (*deleteTool) Description() string {
	return "Delete a file, a symlink (not its target) or, with recursive=true, a directory and everything " +
		"in it. The workspace itself cannot be deleted."
}

func (*deleteTool) Parameters() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Path, relative to the workspace or absolute inside it."},
    "recursive": {"type": "boolean", "description": "Must be true to delete a directory (with its contents)."}
  },
  "required": ["path"]
}`)
}

type deleteArgs struct {
	Path      *string `json:"path"`
	Recursive bool    `json:"recursive"`
}

// Run deletes the path. It does not block beyond the filesystem calls.
func (d *deleteTool) Run(_ context.Context, call Call) Result {
	var args deleteArgs
	if err := decodeArgs(call.Args, &args); err != nil {
		return failed("%v", err)
	}
	ws := d.ws.forCall(call.Args)
	if args.Path == nil {
		return missing("path")
	}
	real, err := ws.resolveLink(*args.Path)
	if err != nil {
		return failed("%v", err)
	}
	name := ws.display(real)
	if ws.isRoot(real) {
		return failed("refused: %s is the workspace itself", ws.root)
	}
	st, err := os.Lstat(real)
	switch {
	case os.IsNotExist(err):
		return failed("%s does not exist", name)
	case err != nil:
		return failed("stat %s: %v", name, err)
	case st.IsDir() && !args.Recursive:
		return failed("%s is a directory; pass recursive=true to delete it and its contents", name)
	case st.IsDir():
		if err := os.RemoveAll(real); err != nil {
			return failed("delete %s: %v", name, err)
		}
		return Result{Output: fmt.Sprintf("deleted directory %s and its contents", name)}
	}
	if err := os.Remove(real); err != nil {
		return failed("delete %s: %v", name, err)
	}
	return Result{Output: fmt.Sprintf("deleted %s", name)}
}
