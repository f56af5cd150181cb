package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/boxwire/boxwire/agent/tool"
)

// Limits of edit_file's messages.
const (
	maxMatchLines   = 20 // line numbers named for an ambiguous edit
	snippetContext  = 2  // lines shown around an edit
	maxSnippetLines = 16 // lines of a snippet
	maxHintScan     = 20000
)

type editFile struct{ ws workspace }

func (*editFile) Name() string { return "edit_file" }

func (*editFile) Description() string {
	return "Replace exact text in a file: old must match the file's text exactly (whitespace and " +
		"indentation included) and, unless replace_all is true, exactly once; include enough surrounding " +
		"lines to make it unique. Returns how many places changed and the edited lines."
}

func (*editFile) Parameters() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path, relative to the workspace or absolute inside it."},
    "old": {"type": "string", "description": "The exact text to replace."},
    "new": {"type": "string", "description": "The replacement text."},
    "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring exactly one."}
  },
  "required": ["path", "old", "new"]
}`)
}

type editArgs struct {
	Path       *string `json:"path"`
	Old        *string `json:"old"`
	New        *string `json:"new"`
	ReplaceAll bool    `json:"replace_all"`
}

// Run edits the file atomically. It does not block beyond the file I/O.
func (e *editFile) Run(_ context.Context, call Call) Result {
	var args editArgs
	if err := tool.DecodeArgs(call.Args, &args); err != nil {
		return tool.Failed("%v", err)
	}
	ws := e.ws.forCall(call.Args)
	switch {
	case args.Path == nil:
		return tool.Missing("path")
	case args.Old == nil:
		return tool.Missing("old")
	case args.New == nil:
		return tool.Missing("new")
	case *args.Old == "":
		return tool.Failed("old is empty; to create or overwrite a whole file use write_file")
	case *args.Old == *args.New:
		return tool.Failed("old and new are the same; nothing to change")
	}
	real, err := ws.resolve(*args.Path)
	if err != nil {
		return tool.Failed("%v", err)
	}
	name := ws.display(real)
	f, err := openRegular(real, name)
	if err != nil {
		return tool.Failed("%v", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return tool.Failed("stat %s: %v", name, err)
	}
	data, err := readAll(f)
	f.Close()
	if err != nil {
		return tool.Failed("read %s: %v", name, err)
	}
	if bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0 {
		return tool.Failed("refused: %s looks like a binary file", name)
	}
	out, n, msg := Replace(string(data), *args.Old, *args.New, args.ReplaceAll)
	if msg != "" {
		return tool.Failed("%s: %s", name, msg)
	}
	if err := writeAtomic(real, []byte(out), st.Mode().Perm()); err != nil {
		return tool.Failed("write %s: %v", name, err)
	}
	first := strings.Index(out, *args.New)
	if i := strings.Index(string(data), *args.Old); i >= 0 {
		first = i
	}
	plural := "s"
	if n == 1 {
		plural = ""
	}
	return Result{Output: fmt.Sprintf("replaced %d occurrence%s in %s\n%s", n, plural, name,
		snippet(out, first, len(*args.New)))}
}

func readAll(f *os.File) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(f)
	return b.Bytes(), err
}

// Replace replaces old with new in content: exactly one occurrence, or all
// of them when all is true. It returns the new content and the number of
// replacements, or, when it refuses, a message for the model: not found
// (with the nearest line, or a note that only whitespace differs) or found
// several times (with the line numbers). Replace is pure; edit_file uses it
// and tests fuzz it.
func Replace(content, old, new string, all bool) (string, int, string) {
	if old == "" {
		return content, 0, "old is empty"
	}
	if old == new {
		return content, 0, "old and new are the same"
	}
	n := strings.Count(content, old)
	switch {
	case n == 0:
		return content, 0, notFound(content, old)
	case n > 1 && !all:
		return content, 0, fmt.Sprintf("old matches %d places (lines %s); add surrounding lines to make it unique, or pass replace_all=true",
			n, matchLines(content, old))
	}
	return strings.ReplaceAll(content, old, new), n, ""
}

// matchLines lists the line numbers where old starts.
func matchLines(content, old string) string {
	var nums []string
	line, pos := 1, 0
	for len(nums) < maxMatchLines {
		i := strings.Index(content[pos:], old)
		if i < 0 {
			break
		}
		line += strings.Count(content[pos:pos+i], "\n")
		nums = append(nums, fmt.Sprint(line))
		line += strings.Count(old, "\n")
		pos += i + len(old)
	}
	s := strings.Join(nums, ", ")
	if strings.Count(content, old) > len(nums) {
		s += ", ..."
	}
	return s
}

// notFound explains a missing match.
func notFound(content, old string) string {
	if loose := trimLines(old); loose != "" && strings.Contains(trimLines(content), loose) {
		return "old was not found exactly, but it matches when trailing whitespace and line endings are " +
			"ignored: copy the text exactly as read_file shows it (check spaces at line ends, tabs, CRLF and the final newline)"
	}
	want := ""
	for _, l := range strings.Split(old, "\n") {
		if strings.TrimSpace(l) != "" {
			want = strings.TrimSpace(l)
			break
		}
	}
	best, bestLine, bestScore := "", 0, -1
	for i, l := range strings.SplitN(content, "\n", maxHintScan) {
		if s := similarity(want, strings.TrimSpace(l)); s > bestScore {
			best, bestLine, bestScore = l, i+1, s
		}
	}
	if bestScore <= 0 {
		return "old was not found, and no line resembles its first line; read the file again"
	}
	return fmt.Sprintf("old was not found; the line most like its first line is line %d: %q", bestLine,
		tool.OneLine(strings.TrimRight(best, "\r"), 200))
}

// trimLines drops trailing blanks and carriage returns from every line
// and trailing newlines from the end.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// similarity scores how alike a and b are: the length of their longest
// common prefix plus that of their longest common suffix, so a line with a
// typo in the middle scores high. Cheap on purpose.
func similarity(a, b string) int {
	if a == "" || b == "" {
		return 0
	}
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	return p + s
}

// snippet shows numbered lines around the text at byte offset at of
// length n.
func snippet(content string, at, n int) string {
	if at < 0 {
		return ""
	}
	lines := strings.Split(content, "\n")
	first := strings.Count(content[:at], "\n")
	last := first + strings.Count(content[at:min(at+n, len(content))], "\n")
	from, to := max(first-snippetContext, 0), min(last+snippetContext, len(lines)-1)
	to = min(to, from+maxSnippetLines-1)
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%d\t%s\n", i+1, oneLineKeep(lines[i]))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// oneLineKeep shortens a very long line for a snippet.
func oneLineKeep(s string) string {
	if len(s) > maxLineBytes {
		return string(tool.TrimPartialRune([]byte(s[:maxLineBytes]))) + " ..."
	}
	return s
}
