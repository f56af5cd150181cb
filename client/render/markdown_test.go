package render_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/render"
)

// answer is a markdown answer with every construct the renderer styles
// and the traps: unclosed markers, a rule, "*" and "#" that are text.
const answer = "# Title\n" +
	"Some **bold** and `code` text, 2*3*4, a #tag and an unclosed **star.\n" +
	"- item one\n* item `two`\n> quoted **words**\n" +
	"---\n" +
	"```go\nfunc main() {\n\tfmt.Println(\"**not bold**\")\n}\n```\n" +
	"## Done\nlast line without newline **x**"

// renderChunks renders answer as deltas cut at the given offsets.
func renderChunks(t *testing.T, cuts []int) string {
	t.Helper()
	var buf bytes.Buffer
	r := render.New(&buf, render.Options{Color: true})
	prev := 0
	for _, c := range append(cuts, len(answer)) {
		if err := r.Render(ev(wire.TypeAssistantDelta, "m", wire.Text{Text: answer[prev:c]})); err != nil {
			t.Fatal(err)
		}
		prev = c
	}
	if err := r.Render(ev(wire.TypeAssistantMessage, "m", wire.Text{Text: answer})); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// The styled output does not depend on how the stream was cut: every
// single cut, and cuts at every byte, give the golden rendering.
func TestMarkdownStreaming(t *testing.T) {
	t.Parallel()
	whole := renderChunks(t, nil)
	golden := filepath.Join("testdata", "markdown.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(whole), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if whole != string(want) {
		t.Fatalf("output differs from %s:\n--- got\n%s\n--- want\n%s", golden, whole, want)
	}
	for i := 1; i < len(answer); i++ {
		if got := renderChunks(t, []int{i}); cells(got) != cells(whole) {
			t.Fatalf("cut at %d (%q|%q): got\n%q\nwant\n%q", i, answer[:i], answer[i:], got, whole)
		}
	}
	var every []int
	for i := 1; i < len(answer); i++ {
		every = append(every, i)
	}
	if got := renderChunks(t, every); cells(got) != cells(whole) {
		t.Fatalf("byte by byte: got\n%q\nwant\n%q", got, whole)
	}
}

// cells renders an ANSI string as what the screen shows: each character
// with the style it is drawn in, so that "\x1b[1mab\x1b[0m" and
// "\x1b[1ma\x1b[0m\x1b[1mb\x1b[0m" compare equal.
func cells(s string) string {
	var b strings.Builder
	style := ""
	for s != "" {
		if strings.HasPrefix(s, "\x1b[") {
			end := strings.IndexByte(s, 'm')
			style = s[2:end]
			if style == "0" {
				style = ""
			}
			s = s[end+1:]
			continue
		}
		r, n := utf8.DecodeRuneInString(s)
		fmt.Fprintf(&b, "%s:%c|", style, r)
		s = s[n:]
	}
	return b.String()
}

// Without Color the text is written exactly as it streamed.
func TestMarkdownPlain(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	r := render.New(&buf, render.Options{})
	for _, c := range strings.SplitAfter(answer, " ") {
		if err := r.Render(ev(wire.TypeAssistantDelta, "m", wire.Text{Text: c})); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.EndLine(); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != answer+"\n" {
		t.Fatalf("got %q", got)
	}
}
