package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// Logs bound: a sandbox's main process (the agent) logs to stderr; the
// engine keeps at most logMaxSize per file in logMaxFiles files (set at
// create), and Logs reads at most logsReadLimit of a tail.
const (
	logMaxSize    = "1m"
	logMaxFiles   = "2"
	logsReadLimit = 64 << 10
)

// Logs returns the last tail lines the sandbox's main process wrote to
// stdout and stderr (interleaved as the engine stored them), at most 64 KiB
// of them; it works on a stopped sandbox too, until it is removed. The
// bridge logs them when a sandbox dies, so an operator can see why.
func (d *Docker) Logs(ctx context.Context, id string, tail int) (string, error) {
	rc, err := d.cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{
		ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(tail),
	})
	if err != nil {
		return "", fmt.Errorf("logs of sandbox %s: %w", id, d.mapErr(err, ErrNotFound))
	}
	defer rc.Close()
	var out bytes.Buffer
	w := &limitWriter{w: &out, n: logsReadLimit}
	if _, err := stdcopy.StdCopy(w, w, rc); err != nil && err != errLimit {
		return out.String(), fmt.Errorf("read logs of sandbox %s: %w", id, err)
	}
	return out.String(), nil
}

// errLimit ends a copy into a full limitWriter.
var errLimit = fmt.Errorf("log tail longer than %d bytes", logsReadLimit)

// limitWriter keeps the first n bytes written to it and then fails.
type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if len(p) > l.n {
		_, _ = l.w.Write(p[:l.n])
		l.n = 0
		return 0, errLimit
	}
	l.n -= len(p)
	return l.w.Write(p)
}
