package exitlog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/internal/exitlog"
	"github.com/boxwire/boxwire/bridge/sandbox"
)

type logs struct {
	text string
	err  error
	tail int
}

func (l *logs) Logs(_ context.Context, _ string, tail int) (string, error) {
	l.tail = tail
	return l.text, l.err
}

func lines(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s %d\n", prefix, i)
	}
	return b.String()
}

func TestLog(t *testing.T) {
	t.Parallel()
	crash := lines("info", 50) + "fatal error: out of memory\n" + lines("goroutine", 100)
	cases := []struct {
		name      string
		logs      logs
		want      []string
		wantNot   []string
		wantLines int // of agent_log, 0: not checked
	}{
		{name: "a crash report from its start", logs: logs{text: crash},
			want: []string{"fatal error: out of memory", "goroutine 28"}, wantNot: []string{"info 49", "goroutine 29"}, wantLines: 30},
		{name: "else the end", logs: logs{text: lines("line", 100)},
			want: []string{"line 70", "line 99"}, wantNot: []string{"line 69"}, wantLines: 30},
		{name: "a short log", logs: logs{text: "panic: boom\n"}, want: []string{"panic: boom"}, wantLines: 1},
		{name: "no log", logs: logs{err: errors.New("engine down")}, want: []string{"logs_err", "engine down"}, wantNot: []string{"agent_log"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf strings.Builder
			log := slog.New(slog.NewJSONHandler(&buf, nil))
			exitlog.Log(context.Background(), &tc.logs, log, sandbox.Sandbox{ID: "sb1"}, "exited with code 2")
			out := buf.String()
			for _, w := range append(tc.want, "sandbox stopped", "sb1", "exited with code 2") {
				if !strings.Contains(out, w) {
					t.Errorf("log lacks %q: %s", w, out)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(out, w) {
					t.Errorf("log has %q: %s", w, out)
				}
			}
			if tc.wantLines > 0 && strings.Count(out, `\n`)+1 != tc.wantLines {
				t.Errorf("agent_log has %d lines, want %d: %s", strings.Count(out, `\n`)+1, tc.wantLines, out)
			}
			if tc.logs.tail != 400 {
				t.Errorf("read %d lines of the log, want 400", tc.logs.tail)
			}
		})
	}
}
