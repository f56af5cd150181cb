package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/boxwire/boxwire/agent/tool"
)

// maxLsEntries caps one listing.
const maxLsEntries = 1000

type ls struct {
	ws    workspace
	limit int
}

func (*ls) Name() string { return "ls" }

func (*ls) Description() string {
	return "List a directory of the workspace: one entry per line as type, size in bytes, modification " +
		"time and name, sorted by name; directories end with /, symlinks show their target."
}

func (*ls) Parameters() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Directory, relative to the workspace or absolute inside it; default the workspace."}
  },
  "required": []
}`)
}

type lsArgs struct {
	Path *string `json:"path"`
}

// Run lists the directory. It does not block beyond the directory reads.
func (l *ls) Run(_ context.Context, call Call) Result {
	var args lsArgs
	if err := tool.DecodeArgs(call.Args, &args); err != nil {
		return tool.Failed("%v", err)
	}
	ws := l.ws.forCall(call.Args)
	path := "."
	if args.Path != nil {
		path = *args.Path
	}
	real, err := ws.resolveRead(path)
	if err != nil {
		return tool.Failed("%v", err)
	}
	name := ws.display(real)
	st, err := os.Stat(real)
	switch {
	case err != nil && os.IsNotExist(err):
		return tool.Failed("%s does not exist", name)
	case err != nil:
		return tool.Failed("stat %s: %v", name, err)
	case !st.IsDir():
		return Result{Output: entryLine(real, filepath.Base(real), st)}
	}
	entries, err := os.ReadDir(real) // sorted by name
	if err != nil {
		return tool.Failed("read directory %s: %v", name, err)
	}
	if len(entries) == 0 {
		return Result{Output: fmt.Sprintf("(%s is an empty directory)", name)}
	}
	var b strings.Builder
	shown := 0
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		line := entryLine(filepath.Join(real, e.Name()), e.Name(), info) + "\n"
		if shown >= maxLsEntries || b.Len()+len(line) > l.limit {
			break
		}
		b.WriteString(line)
		shown++
	}
	if shown < len(entries) {
		fmt.Fprintf(&b, "[%d of %d entries shown; list a subdirectory or use glob to narrow it]", shown, len(entries))
		return Result{Output: b.String(), Truncated: true}
	}
	fmt.Fprintf(&b, "[%s: %d entries]", name, len(entries))
	return Result{Output: b.String()}
}

// entryLine describes one directory entry.
func entryLine(path, name string, info fs.FileInfo) string {
	kind, size := "file", fmt.Sprint(info.Size())
	switch mode := info.Mode(); {
	case mode.IsDir():
		kind, size, name = "dir", "-", name+"/"
	case mode&fs.ModeSymlink != 0:
		kind = "link"
		if target, err := os.Readlink(path); err == nil {
			name += " -> " + target
		}
	case !mode.IsRegular():
		kind = "other"
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s", kind, size, info.ModTime().UTC().Format(time.DateTime), name)
}
