package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/boxwire/boxwire/agent/tool"
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
	if err := tool.DecodeArgs(call.Args, &args); err != nil {
		return tool.Failed("%v", err)
	}
	ws := d.ws.forCall(call.Args)
	if args.Path == nil {
		return tool.Missing("path")
	}
	real, err := ws.resolveLink(*args.Path)
	if err != nil {
		return tool.Failed("%v", err)
	}
	name := ws.display(real)
	if ws.isRoot(real) {
		return tool.Failed("refused: %s is the workspace itself", ws.root)
	}
	st, err := os.Lstat(real)
	switch {
	case os.IsNotExist(err):
		return tool.Failed("%s does not exist", name)
	case err != nil:
		return tool.Failed("stat %s: %v", name, err)
	case st.IsDir() && !args.Recursive:
		return tool.Failed("%s is a directory; pass recursive=true to delete it and its contents", name)
	case st.IsDir():
		if err := os.RemoveAll(real); err != nil {
			return tool.Failed("delete %s: %v", name, err)
		}
		return Result{Output: fmt.Sprintf("deleted directory %s and its contents", name)}
	}
	if err := os.Remove(real); err != nil {
		return tool.Failed("delete %s: %v", name, err)
	}
	return Result{Output: fmt.Sprintf("deleted %s", name)}
}
