package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/boxwire/boxwire/agent/tool"
)

// grep limits.
const (
	defaultGrepResults = 100
	maxGrepResults     = 2000
	maxGrepLineBytes   = 300
)

// Output modes of grep.
const (
	grepFiles   = "files"
	grepContent = "content"
	grepCount   = "count"
)

type grep struct {
	ws        workspace
	limit     int
	noRipgrep bool
}

func (*grep) Name() string { return "grep" }

func (*grep) Description() string {
	return "Search file contents in the workspace. The pattern is literal text unless regex=true " +
		"(RE2 syntax). mode=files (default) lists matching files, content shows path:line: text, count " +
		"shows matching lines per file. .git and binary files are skipped; dot-files are searched. Results " +
		"are sorted by path and capped by max_results (default 100)."
}

func (*grep) Parameters() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "Text to find (a regular expression if regex is true)."},
    "path": {"type": "string", "description": "Directory or file to search; default the workspace."},
    "glob": {"type": "string", "description": "Only search files whose path matches this glob (e.g. *.go, src/**/*.ts)."},
    "mode": {"type": "string", "enum": ["files", "content", "count"], "description": "What to show (default files)."},
    "regex": {"type": "boolean", "description": "Treat pattern as a regular expression."},
    "ignore_case": {"type": "boolean", "description": "Match case-insensitively."},
    "max_results": {"type": "integer", "minimum": 1, "description": "Maximum files (files, count) or lines (content) to show; default 100."}
  },
  "required": ["pattern"]
}`)
}

type grepArgs struct {
	Pattern    *string `json:"pattern"`
	Path       *string `json:"path"`
	Glob       *string `json:"glob"`
	Mode       string  `json:"mode"`
	Regex      bool    `json:"regex"`
	IgnoreCase bool    `json:"ignore_case"`
	MaxResults *int    `json:"max_results"`
}

// grepQuery is a validated search.
type grepQuery struct {
	pattern    string
	regex      bool
	ignoreCase bool
	re         *regexp.Regexp // matches one line
	root       string         // the workspace's real path
	target     string         // the real path to search
	glob       *matcher
}

// grepMatch is one matching line; path is relative to the workspace.
type grepMatch struct {
	path string
	line int
	text string
}

// searcher runs a query and calls fn for every matching line of every
// file, file by file in path order (byte-wise), lines in order. A file
// holding a NUL byte is binary: none of its lines are reported. fn returns
// false to stop the search.
type searcher func(ctx context.Context, q *grepQuery, fn func(file string, lines []grepMatch) bool) error

// Run searches. It stops when ctx ends.
func (g *grep) Run(ctx context.Context, call Call) Result {
	var args grepArgs
	if err := tool.DecodeArgs(call.Args, &args); err != nil {
		return tool.Failed("%v", err)
	}
	q, max, err := g.query(g.ws.forCall(call.Args), args)
	if err != nil {
		return tool.Failed("%v", err)
	}
	if args.Mode == "" {
		args.Mode = grepFiles
	}
	search := searchGo
	if !g.noRipgrep {
		if rg, err := exec.LookPath("rg"); err == nil {
			search = ripgrep(rg)
		}
	}
	return collect(ctx, search, q, args.Mode, max, g.limit)
}

// query validates the arguments.
func (g *grep) query(ws workspace, args grepArgs) (*grepQuery, int, error) {
	if args.Pattern == nil || *args.Pattern == "" {
		return nil, 0, errors.New(`missing required argument "pattern"`)
	}
	if strings.ContainsAny(*args.Pattern, "\r\n") {
		return nil, 0, errors.New("the pattern must not contain a line break: grep matches within one line")
	}
	switch args.Mode {
	case "", grepFiles, grepContent, grepCount:
	default:
		return nil, 0, fmt.Errorf("mode must be files, content or count, got %q", args.Mode)
	}
	max := defaultGrepResults
	if args.MaxResults != nil {
		if *args.MaxResults <= 0 {
			return nil, 0, fmt.Errorf("max_results must be 1 or more, got %d", *args.MaxResults)
		}
		max = min(*args.MaxResults, maxGrepResults)
	}
	q := &grepQuery{pattern: *args.Pattern, regex: args.Regex, ignoreCase: args.IgnoreCase}
	expr := *args.Pattern
	if !args.Regex {
		expr = regexp.QuoteMeta(expr)
	}
	if args.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, 0, fmt.Errorf("invalid regular expression: %v", err)
	}
	q.re = re
	path := "."
	if args.Path != nil && *args.Path != "" {
		path = *args.Path
	}
	if q.root, err = ws.resolve("."); err != nil {
		return nil, 0, err
	}
	given := ws.root
	if q.target, err = ws.resolve(path); err != nil {
		return nil, 0, err
	}
	st, err := os.Stat(q.target)
	if err != nil {
		return nil, 0, fmt.Errorf("%s does not exist", ws.display(q.target))
	}
	if ws.sandbox { // paths relative to the searched folder, which may be outside the workspace
		q.root, given = q.target, path
		if !st.IsDir() {
			q.root, given = filepath.Dir(q.target), filepath.Dir(path)
		}
	}
	if args.Glob != nil && *args.Glob != "" {
		if q.glob, err = newMatcher(*args.Glob, q.root, given); err != nil {
			return nil, 0, err
		}
		q.glob.dots = true // the glob only filters; dot-files are searched
	}
	return q, max, nil
}

// keep reports whether a file (workspace-relative) passes the glob.
func (q *grepQuery) keep(rel string) bool {
	return q.glob == nil || q.glob.match(rel)
}

// relPath makes a real path workspace-relative, with slashes.
func (q *grepQuery) relPath(real string) string {
	rel, err := filepath.Rel(q.root, real)
	if err != nil {
		return real
	}
	return filepath.ToSlash(rel)
}

// collect runs the search and formats the results for mode.
func collect(ctx context.Context, search searcher, q *grepQuery, mode string, max, limit int) Result {
	var out []string
	files, shown, more := 0, 0, false
	err := search(ctx, q, func(file string, lines []grepMatch) bool {
		if !q.keep(file) {
			return true
		}
		files++
		switch mode {
		case grepFiles:
			out = append(out, file)
		case grepCount:
			out = append(out, fmt.Sprintf("%s: %d", file, len(lines)))
		default:
			for _, m := range lines {
				if shown >= max {
					more = true
					return false
				}
				out = append(out, fmt.Sprintf("%s:%d: %s", m.path, m.line, oneLineKeepN(m.text, maxGrepLineBytes)))
				shown++
			}
			return true
		}
		if len(out) >= max {
			more = true
			return false
		}
		return true
	})
	if err != nil {
		return tool.Failed("grep: %v", err)
	}
	if len(out) == 0 {
		return Result{Output: fmt.Sprintf("no matches for %q", q.pattern)}
	}
	what := map[string]string{grepFiles: "files", grepCount: "files", grepContent: "matching lines"}[mode]
	res := capList(out, len(out), limit, what, "narrow the search with path or glob")
	if more {
		res.Truncated = true
		res.Output = strings.TrimSuffix(res.Output, fmt.Sprintf("[%d %s]", len(out), what))
		res.Output += fmt.Sprintf("[stopped after %d %s; there are more: narrow the search with path or glob, or raise max_results]", len(out), what)
	}
	return res
}

// oneLineKeepN cuts s to n bytes on a character boundary.
func oneLineKeepN(s string, n int) string {
	if len(s) > n {
		return string(tool.TrimPartialRune([]byte(s[:n]))) + " ..."
	}
	return s
}
