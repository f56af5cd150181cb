package hosttools

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/internal/mcpclient"
)

// call runs the server's tool with args under the server's timeout; id is
// the call's progress token. A failure is the result's Error.
func (s *server) call(ctx context.Context, tool string, args map[string]any, id string, say func(string)) wire.HostResult {
	sess, ended, err := s.conn.Session(ctx)
	if err != nil {
		return wire.HostResult{Error: fmt.Sprintf("host tool server %s is unavailable: %v", s.cfg.Name, err)}
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if say != nil && id != "" {
		params.SetProgressToken(id)
		s.pmu.Lock()
		if s.progress == nil {
			s.progress = map[string]func(string){}
		}
		s.progress[id] = say
		s.pmu.Unlock()
		defer func() {
			s.pmu.Lock()
			delete(s.progress, id)
			s.pmu.Unlock()
		}()
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	res, err := sess.CallTool(cctx, params) // cctx ending sends notifications/cancelled
	switch {
	case err == nil:
		return result(res)
	case ctx.Err() != nil:
		return wire.HostResult{Error: "cancelled: the turn was interrupted (the host tool was told to stop)"}
	case cctx.Err() != nil:
		return wire.HostResult{Error: fmt.Sprintf("cancelled: the call took longer than its timeout of %s", s.cfg.timeout)}
	case mcpclient.Ended(err) || !s.conn.Live(sess):
		select { // the session's end has the command's exit and last words
		case <-ended:
		case <-time.After(endWait):
		}
		s.conn.Drop(sess)
		return wire.HostResult{Error: fmt.Sprintf("host tool server %s ended during the call (%v)%s; it is started again for the next call",
			s.cfg.Name, err, s.stderrWords())}
	}
	return wire.HostResult{Error: fmt.Sprintf("host tool %s: %v", tool, err)}
}

// endWait bounds waiting for a server that failed a call to be seen
// ending, for its last words.
const endWait = 3 * time.Second

// stderrWords is the end of the command's standard error, for an error.
func (s *server) stderrWords() string {
	s.mu.Lock()
	t := s.stderr
	s.mu.Unlock()
	return t.words()
}

// result converts a tool's result: its text (mcpclient.Text), capped;
// an error result's text goes in Error too.
func result(res *mcp.CallToolResult) wire.HostResult {
	out := wire.HostResult{Output: capped(mcpclient.Text(res))}
	if res.IsError {
		out.Error = "the tool reported an error"
		if out.Output != "" {
			out.Error += ": " + firstLine(out.Output)
		}
	}
	return out
}

// capped cuts s to MaxResultBytes, saying so.
func capped(s string) string {
	if len(s) <= MaxResultBytes {
		return s
	}
	cut := strings.ToValidUTF8(s[:MaxResultBytes], "")
	return cut + fmt.Sprintf("\n[host tool output cut: %d bytes in all, %d shown]", len(s), len(cut))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if len(line) > 200 {
		line = strings.ToValidUTF8(line[:200], "") + "…"
	}
	return line
}

// tail keeps the last tailBytes written to it: a command's stderr.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailBytes = 2048

// Write keeps the end of p.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailBytes {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(p), nil
}

// words is "; its standard error ended: ..." or "" (nil t too).
func (t *tail) words() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	w := strings.TrimSpace(strings.ToValidUTF8(string(t.buf), ""))
	if w == "" {
		return ""
	}
	if i := strings.LastIndexByte(w, '\n'); i >= 0 && len(w)-i < 400 && i > len(w)-400 {
		w = w[max(0, len(w)-400):]
	}
	return "; its standard error ended: " + w
}
