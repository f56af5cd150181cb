// Package exitlog tells the operator why a sandbox stopped: the bridge's
// log gets the reason its clients are sent and what the sandbox's agent
// wrote last, from the start of a Go crash report when there is one. It
// only reads the sandbox's log (sandbox.Manager.Logs); it starts no
// goroutines.
package exitlog

import (
	"context"
	"log/slog"
	"strings"

	"github.com/boxwire/boxwire/bridge/sandbox"
)

// Of a dead sandbox's log Log reads the last readLines lines and logs
// keepLines of them: from the start of a Go crash report ("panic:",
// "fatal error:", "runtime: ..."), whose first lines say why, or else the
// last ones.
const (
	readLines = 400
	keepLines = 30
)

// Logs reads the end of a sandbox's log (sandbox.Manager has it).
type Logs interface {
	Logs(ctx context.Context, id string, tail int) (string, error)
}

// Log warns on log that sb stopped, for reason msg, with what its agent
// wrote last (which clients are not sent). It blocks until mgr answers or
// ctx ends.
func Log(ctx context.Context, mgr Logs, log *slog.Logger, sb sandbox.Sandbox, msg string) {
	tail, err := mgr.Logs(ctx, sb.ID, readLines)
	if err != nil {
		log.Warn("sandbox stopped", "sandbox", sb.ID, "reason", msg, "logs_err", err)
		return
	}
	log.Warn("sandbox stopped", "sandbox", sb.ID, "reason", msg, "agent_log", crashLines(tail, keepLines))
}

// crashLines returns n lines of log: from the first line that starts a Go
// crash report, else the last n.
func crashLines(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") ||
			strings.HasPrefix(l, "runtime: ") || strings.HasPrefix(l, "runtime/cgo: ") {
			return strings.Join(lines[i:min(i+n, len(lines))], "\n")
		}
	}
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
