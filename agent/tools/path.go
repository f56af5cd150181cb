package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// workspace confines paths to a root directory.
type workspace struct {
	root string
}

// resolve turns a path from the model into the real absolute path it names:
// relative paths resolve against the workspace, symlinks are followed as far
// as the path exists, and the result must stay inside the workspace. The
// final component need not exist.
func (w workspace) resolve(path string) (string, error) {
	if path == "" {
		return "", errors.New("path is empty")
	}
	root, err := filepath.EvalSymlinks(w.root)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", w.root, err)
	}
	abs := filepath.Clean(path)
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(w.root, abs)
	}
	if !within(filepath.Clean(w.root), abs) && !within(root, abs) {
		return "", fmt.Errorf("path %q is outside the workspace %s", path, w.root)
	}
	real, err := evalExisting(abs)
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", path, err)
	}
	if !within(root, real) {
		return "", fmt.Errorf("path %q resolves to %s, outside the workspace %s", path, real, w.root)
	}
	return real, nil
}

// evalExisting resolves the symlinks of the deepest existing ancestor of
// abs and appends the components that do not exist yet.
func evalExisting(abs string) (string, error) {
	cur, rest := abs, ""
	for {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", err
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// within reports whether path is root or below it; both are clean and
// absolute.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return false
	}
	return rel != ".." && !strings.HasPrefix(rel, "../")
}

// display names a resolved path for the model: relative to the workspace.
func (w workspace) display(real string) string {
	root, err := filepath.EvalSymlinks(w.root)
	if err != nil {
		return real
	}
	if rel, err := filepath.Rel(root, real); err == nil && within(root, real) {
		return rel
	}
	return real
}
