package execute_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/agent/execute"
)

// seqLines is lines "1\n" .. "n\n".
func seqLines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

// chunked splits s into pieces of n bytes, as a terminal delivers output.
func chunked(s string, n int) []string {
	var out []string
	for len(s) > n {
		out, s = append(out, s[:n]), s[n:]
	}
	return append(out, s)
}

// Cut output keeps whole lines only: every line the model sees is a line
// of the output, and the marker counts the lines and bytes left out.
func TestCaptureCutsAtLineBoundaries(t *testing.T) {
	full := seqLines(5000) // 23893 bytes: lines of 2 to 5 bytes
	for _, limit := range []int{100, 101, 333, 1000, 4096} {
		for _, chunk := range []int{1, 7, 4096, len(full)} {
			t.Run(fmt.Sprintf("limit %d chunk %d", limit, chunk), func(t *testing.T) {
				text, cut, lines := execute.Capture(limit, "/out/x.log", chunked(full, chunk)...)
				if !cut || lines != 5000 {
					t.Fatalf("cut = %v, lines = %d; want true, 5000", cut, lines)
				}
				head, rest, ok := strings.Cut(text, "... [")
				marker, tail, ok2 := strings.Cut(rest, "] ...\n")
				if !ok || !ok2 {
					t.Fatalf("no marker in %q", text)
				}
				if !strings.HasPrefix(full, head) || !strings.HasSuffix(full, tail) {
					t.Fatalf("head or tail is not the output's: %q ... %q", head, tail)
				}
				if !strings.HasSuffix(head, "\n") || !strings.HasPrefix(full[len(full)-len(tail)-1:], "\n") {
					t.Errorf("a line was cut: head ends %q, tail begins %q", head[max(len(head)-6, 0):], tail[:min(6, len(tail))])
				}
				if len(head)+len(tail) > limit {
					t.Errorf("kept %d bytes for a limit of %d", len(head)+len(tail), limit)
				}
				omitted := full[len(head) : len(full)-len(tail)]
				want := fmt.Sprintf("%d lines, %d bytes omitted; the full output is in /out/x.log",
					strings.Count(omitted, "\n"), len(omitted))
				if marker != want {
					t.Errorf("marker %q, want %q", marker, want)
				}
			})
		}
	}
}

func TestCaptureEdges(t *testing.T) {
	long := strings.Repeat("x", 500)
	tests := []struct {
		name   string
		limit  int
		chunks []string
		want   string
	}{
		{"whole", 100, []string{"a\nb\n"}, "a\nb\n"},
		{"exactly the limit", 4, []string{"a\nb\n"}, "a\nb\n"},
		{"no newline at the end", 10, []string{"1\n2\n3\n4\n5\n6\n7\n8"},
			"1\n2\n... [3 lines, 6 bytes omitted] ...\n6\n7\n8"},
		{"tail begins a line", 8, []string{"1\n2\n3\n4\n5\n6\n7\n8\n"},
			"1\n2\n... [4 lines, 8 bytes omitted] ...\n7\n8\n"},
		{"one long line", 10, []string{long},
			"xxxxx\n... [0 lines, 490 bytes omitted, cutting a line too long to show whole] ...\nxxxxx"},
		{"long line in the middle", 10, []string{"a\n" + long + "\nb\n"},
			"a\n... [1 line, 501 bytes omitted] ...\nb\n"},
		{"no newline in the tail", 10, []string{"a\n" + long},
			"a\n... [0 lines, 495 bytes omitted, cutting a line too long to show whole] ...\nxxxxx"},
		{"characters stay whole", 10, []string{strings.Repeat("é", 100)},
			"éé\n... [0 lines, 192 bytes omitted, cutting a line too long to show whole] ...\néé"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, _ := execute.Capture(tt.limit, "", tt.chunks...)
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}
