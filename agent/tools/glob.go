package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/boxwire/boxwire/agent/tool"
)

// maxGlobResults caps one glob's matches.
const maxGlobResults = 1000

type glob struct {
	ws    workspace
	limit int
}

func (*glob) Name() string { return "glob" }

func (*glob) Description() string {
	return "Find files and directories in the workspace whose path matches a glob pattern: * and ? within a " +
		"name, ** across directories, {a,b} alternatives, [abc] classes. A pattern without / matches names " +
		"at any depth (*.go finds every Go file). Dot-files and dot-directories are only matched when the " +
		"pattern names them (.env, **/.github/**). Paths come sorted, relative to the workspace; directories end with /."
}

func (*glob) Parameters() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "Glob pattern, relative to the workspace (or to path), e.g. **/*_test.go or *.md."},
    "path": {"type": "string", "description": "Directory to search from, relative to the workspace or absolute inside it; default the workspace. Paths come relative to it."}
  },
  "required": ["pattern"]
}`)
}

type globArgs struct {
	Pattern *string `json:"pattern"`
	Path    *string `json:"path"`
}

// Run walks the workspace. It stops when ctx ends.
func (g *glob) Run(ctx context.Context, call Call) Result {
	var args globArgs
	if err := tool.DecodeArgs(call.Args, &args); err != nil {
		return tool.Failed("%v", err)
	}
	if args.Pattern == nil || *args.Pattern == "" {
		return tool.Missing("pattern")
	}
	ws := g.ws.forCall(call.Args)
	dir := "."
	if args.Path != nil && *args.Path != "" {
		dir = *args.Path
	}
	root, err := ws.resolve(dir)
	if err != nil {
		return tool.Failed("%v", err)
	}
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return tool.Failed("%s is not a directory", ws.display(root))
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(ws.root, dir)
	}
	m, err := newMatcher(*args.Pattern, root, filepath.Clean(dir))
	if err != nil {
		return tool.Failed("%v", err)
	}
	var found []string
	total := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if err != nil || path == root {
			return nil // unreadable entries are skipped
		}
		rel := filepath.ToSlash(path[len(root)+1:])
		if !m.dots && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if m.match(rel) {
			total++
			if len(found) < maxGlobResults {
				if d.IsDir() {
					rel += "/"
				}
				found = append(found, rel)
			}
		}
		return nil
	})
	if err != nil {
		return tool.Failed("glob interrupted: %v", err)
	}
	if total == 0 {
		return Result{Output: fmt.Sprintf("no paths match %s", *args.Pattern)}
	}
	slices.Sort(found)
	return capList(found, total, g.limit, "paths", "narrow the pattern")
}

// capList joins lines up to limit bytes and notes what was left out.
func capList(lines []string, total, limit int, what, hint string) Result {
	var b strings.Builder
	shown := 0
	for _, l := range lines {
		if b.Len()+len(l)+1 > limit {
			break
		}
		b.WriteString(l)
		b.WriteByte('\n')
		shown++
	}
	if shown < total {
		fmt.Fprintf(&b, "[%d of %d %s shown; %s]", shown, total, what, hint)
		return Result{Output: b.String(), Truncated: true}
	}
	fmt.Fprintf(&b, "[%d %s]", total, what)
	return Result{Output: b.String()}
}

// matcher matches workspace-relative slash paths against a glob.
type matcher struct {
	pattern string
	dots    bool // the pattern names dot-files
}

// newMatcher validates pattern: relative to the workspace (or absolute
// inside it), without .. components. A pattern without / matches base
// names at any depth.
// newMatcher compiles pattern for paths relative to the searched folder,
// named by dirs (its real path first, then the path as given); an absolute
// pattern must lie below it.
func newMatcher(pattern string, dirs ...string) (*matcher, error) {
	p := filepath.ToSlash(pattern)
	if strings.HasPrefix(p, "/") {
		rel, ok := "", false
		for _, d := range dirs {
			root := strings.TrimSuffix(filepath.ToSlash(filepath.Clean(d)), "/")
			if rel, ok = strings.CutPrefix(p, root+"/"); ok {
				break
			}
		}
		if !ok {
			return nil, fmt.Errorf("pattern %q is outside the workspace or the searched folder %s", pattern, dirs[0])
		}
		p = rel
	}
	p = strings.TrimPrefix(p, "./")
	dots := false
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return nil, fmt.Errorf("pattern %q leaves the workspace (..)", pattern)
		}
		if strings.HasPrefix(seg, ".") && seg != "." {
			dots = true
		}
	}
	if !strings.Contains(p, "/") {
		p = "**/" + p
	}
	if !doublestar.ValidatePattern(p) {
		return nil, errors.New("invalid glob pattern " + fmt.Sprintf("%q", pattern))
	}
	return &matcher{pattern: p, dots: dots}, nil
}

func (m *matcher) match(rel string) bool {
	return doublestar.MatchUnvalidated(m.pattern, rel)
}
