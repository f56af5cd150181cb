package render_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/render"
)

func TestWidth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want int
	}{
		{"empty", "", 0},
		{"ascii", "hello", 5},
		{"cjk", "日本語", 6},
		{"hangul", "한글", 4},
		{"fullwidth latin", "ＡＢ", 4},
		{"emoji", "ok 👍", 5},
		{"emoji zwj family", "👨‍👩‍👧", 2},
		{"flag", "🇯🇵", 2},
		{"combining accent", "e\u0301", 1},
		{"zero width space", "a\u200bb", 2},
		{"zero width joiner alone", "a\u200db", 2},
		{"variation selector", "☺\ufe0f", 2},
		{"latin accented", "café", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := render.Width(tt.in); got != tt.want {
				t.Errorf("Width(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		width int
		want  string
	}{
		{"fits", "hello", 10, "hello"},
		{"exact", "hello", 5, "hello"},
		{"ascii cut", "hello world", 8, "hello w…"},
		{"cjk fits exactly", "日本語", 6, "日本語"},
		{"cjk cut on a whole character", "日本語です", 6, "日本…"},
		{"cjk cut leaves a column free", "日本語です", 7, "日本語…"},
		{"emoji", "👍👍👍👍", 5, "👍👍…"},
		{"zwj sequence kept whole", "👨‍👩‍👧👨‍👩‍👧👨‍👩‍👧", 5, "👨‍👩‍👧👨‍👩‍👧…"},
		{"combining marks count nothing", "e\u0301e\u0301e\u0301", 3, "e\u0301e\u0301e\u0301"},
		{"zero width characters count nothing", "a\u200bb\u200bc", 3, "a\u200bb\u200bc"},
		{"escapes stripped", "\x1b[31mred\x1b[0m text", 8, "red text"},
		{"controls stripped, tab a space", "a\tb\x07c", 10, "a bc"},
		{"width one: no cut", "abc", 1, "abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := render.Clip(tt.in, tt.width)
			if got != tt.want {
				t.Errorf("Clip(%q, %d) = %q, want %q", tt.in, tt.width, got, tt.want)
			}
			if tt.width > 1 && render.Width(got) > tt.width {
				t.Errorf("Clip(%q, %d) is %d columns wide", tt.in, tt.width, render.Width(got))
			}
		})
	}
}

// ansiSeq matches the CSI sequences the renderer writes.
var ansiSeq = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

// TestFoldWideOutput checks that every folded row of wide output fits the
// terminal: a row wider than the screen wraps and the redraw, which
// erases by rows, would leave junk behind.
func TestFoldWideOutput(t *testing.T) {
	t.Parallel()
	const cols = 30
	var buf bytes.Buffer
	r := render.New(&buf, render.Options{Color: true, Fold: true, Width: func() int { return cols }})
	events := []wire.Envelope{
		ev(wire.TypeToolCall, "m", wire.ToolCall{CallID: "c1", Name: "execute", Arguments: []byte(`{"command":"cat wide.txt"}`)}),
		ev(wire.TypeToolOutput, "m", wire.ToolOutput{CallID: "c1", Output: strings.Repeat("漢字", 20) + "\n"}),
		ev(wire.TypeToolOutput, "m", wire.ToolOutput{CallID: "c1", Output: strings.Repeat("😀", 30) + "\n"}),
		ev(wire.TypeToolOutput, "m", wire.ToolOutput{CallID: "c1", Output: strings.Repeat("e\u0301", 40) + "\n"}),
	}
	for _, env := range events {
		if err := r.Render(env); err != nil {
			t.Fatal(err)
		}
	}
	out := ansiSeq.ReplaceAllString(buf.String(), "")
	for _, line := range strings.Split(out, "\n") {
		if w := render.Width(line); w > cols {
			t.Errorf("row %q is %d columns, wider than %d", line, w, cols)
		}
	}
	if !strings.Contains(out, strings.Repeat("e\u0301", 20)) {
		t.Errorf("combining marks were counted as columns: %q", out)
	}
}
