package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// workspace confines paths to a root directory, and allows reads of one
// more directory (where command outputs are kept). A call made with
// sandbox_paths (see forCall) may also name absolute paths below the
// sandbox roots (extra), e.g. /tmp.
type workspace struct {
	root     string
	readOnly string
	extra    []string // clean absolute sandbox roots
	sandbox  bool     // this call may use extra
}

// sandboxArg is the argument a direct caller (run_tool) sets to reach the
// sandbox roots besides the workspace.
type sandboxArg struct {
	SandboxPaths bool `json:"sandbox_paths"`
}

// forCall returns w for one call: with the sandbox roots enabled when the
// arguments say "sandbox_paths": true. They are still inside the sandbox
// (a tmpfs of the container), so nothing reaches past it; what changes is
// only which of the sandbox's own folders a path may name.
func (w workspace) forCall(args json.RawMessage) workspace {
	var a sandboxArg
	if len(w.extra) > 0 && json.Unmarshal(args, &a) == nil && a.SandboxPaths {
		w.sandbox = true
	}
	return w
}

// base returns the root abs (clean, absolute) lies in: the workspace, or
// in sandbox mode one of the extra roots; ok is false when none holds it.
func (w workspace) base(abs string) (clean, real string, ok bool) {
	roots := []string{filepath.Clean(w.root)}
	if w.sandbox {
		roots = append(roots, w.extra...)
	}
	for _, r := range roots {
		rr, err := filepath.EvalSymlinks(r)
		if err != nil {
			continue
		}
		if within(r, abs) || within(rr, abs) {
			return r, rr, true
		}
	}
	return "", "", false
}

// resolveRead is resolve for tools that only read: it also accepts a path
// inside the read-only directory (an absolute path there, as execute's
// results name them).
func (w workspace) resolveRead(path string) (string, error) {
	real, err := w.resolve(path)
	if err == nil || w.readOnly == "" || !filepath.IsAbs(path) {
		return real, err
	}
	dir, derr := filepath.EvalSymlinks(w.readOnly)
	if derr != nil {
		return "", err
	}
	abs := filepath.Clean(path)
	if !within(filepath.Clean(w.readOnly), abs) && !within(dir, abs) {
		return "", err
	}
	r, rerr := evalExisting(abs)
	if rerr != nil || !within(dir, r) {
		return "", err
	}
	return r, nil
}

// resolve turns a path from the model into the real absolute path it names:
// relative paths resolve against the workspace, symlinks are followed as far
// as the path exists, and the result must stay inside the workspace. The
// final component need not exist.
func (w workspace) resolve(path string) (string, error) {
	if path == "" {
		return "", errors.New("path is empty")
	}
	if _, err := filepath.EvalSymlinks(w.root); err != nil {
		return "", fmt.Errorf("workspace %s: %w", w.root, err)
	}
	abs := filepath.Clean(path)
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(w.root, abs)
	}
	base, root, ok := w.base(abs)
	if !ok {
		return "", fmt.Errorf("path %q is outside the workspace %s", path, w.root)
	}
	real, err := evalExisting(abs)
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", path, err)
	}
	if !within(root, real) {
		if base == filepath.Clean(w.root) {
			base = "the workspace " + base
		}
		return "", fmt.Errorf("path %q resolves to %s, outside %s", path, real, base)
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

// resolveLink is resolve for tools that act on a name itself (delete): the
// parent directory is resolved and must be inside the workspace, but a
// final symlink is not followed.
func (w workspace) resolveLink(path string) (string, error) {
	if path == "" {
		return "", errors.New("path is empty")
	}
	abs := filepath.Clean(path)
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(w.root, abs)
	}
	if w.isBase(abs) {
		return w.resolve(path)
	}
	dir, err := w.resolve(filepath.Dir(abs))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.Base(abs)), nil
}

// isRoot reports whether real is the workspace root or, in sandbox mode,
// one of the sandbox roots.
func (w workspace) isRoot(real string) bool {
	_, root, ok := w.base(real)
	return ok && filepath.Clean(real) == root
}

// isBase reports whether abs (clean) names a root itself.
func (w workspace) isBase(abs string) bool {
	base, root, ok := w.base(abs)
	return ok && (abs == base || abs == root)
}
