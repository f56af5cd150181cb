package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/boxwire/boxwire/agent/tool"
)

type writeFile struct {
	ws workspace
}

func (*writeFile) Name() string { return "write_file" }

func (*writeFile) Description() string {
	return "Create or overwrite a file in the workspace with the given content. Parent directories " +
		"are created; an existing file keeps its permissions. The write is atomic: readers see the " +
		"old or the new content, never a mix."
}

func (*writeFile) Parameters() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path, relative to the workspace or absolute inside it."},
    "content": {"type": "string", "description": "The complete new content of the file."}
  },
  "required": ["path", "content"]
}`)
}

type writeFileArgs struct {
	Path    *string `json:"path"`
	Content *string `json:"content"`
}

// Run writes the file. It does not block beyond the file writes.
func (w *writeFile) Run(_ context.Context, call Call) Result {
	var args writeFileArgs
	if err := tool.DecodeArgs(call.Args, &args); err != nil {
		return tool.Failed("%v", err)
	}
	ws := w.ws.forCall(call.Args)
	if args.Path == nil {
		return tool.Missing("path")
	}
	if args.Content == nil {
		return tool.Missing("content")
	}
	real, err := ws.resolve(*args.Path)
	if err != nil {
		return tool.Failed("%v", err)
	}
	name := ws.display(real)
	mode, existed := fs.FileMode(0o644), false
	switch st, err := os.Stat(real); {
	case err == nil && st.IsDir():
		return tool.Failed("%s is a directory", name)
	case err == nil && !st.Mode().IsRegular():
		return tool.Failed("%s is not a regular file", name)
	case err == nil:
		mode, existed = st.Mode().Perm(), true
	case !errors.Is(err, fs.ErrNotExist):
		return tool.Failed("stat %s: %v", name, err)
	}
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		return tool.Failed("create parent directories of %s: %v", name, err)
	}
	if err := writeAtomic(real, []byte(*args.Content), mode); err != nil {
		return tool.Failed("write %s: %v", name, err)
	}
	verb := "created"
	if existed {
		verb = "overwrote"
	}
	return Result{Output: fmt.Sprintf("%s %s (%d bytes written)", verb, name, len(*args.Content))}
}

// writeAtomic writes data to a temporary file next to path and renames it
// over path, so path holds either its old or its new content.
func writeAtomic(path string, data []byte, mode fs.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
