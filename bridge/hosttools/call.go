package hosttools

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/internal/mcpclient"
)

// call runs the server's tool with args under the server's timeout; id is
// the call's id (in its progress token). say gets the server's progress
// messages until call returns, never after. A failure is the result's
// Error.
func (s *server) call(ctx context.Context, tool string, args map[string]any, id string, say func(string)) wire.HostResult {
	sess, ended, err := s.conn.Session(ctx)
	if err != nil {
		return wire.HostResult{Error: fmt.Sprintf("host tool server %s is unavailable: %v", s.cfg.Name, err)}
	}
	params := mcpclient.CallParams{Name: tool, Arguments: args}
	if say != nil {
		defer s.relayProgress(&params, id, say)()
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

// relayProgress has the server's progress messages of the call params
// hand to say, under a token of the call's own (call ids of different
// threads may be alike), and returns what ends that: a message being
// handed on then, which the SDK may deliver after the call's result
// (notifications are handled apart from responses), is waited for, and
// any later one dropped, so that no progress follows the result.
func (s *server) relayProgress(params *mcpclient.CallParams, id string, say func(string)) (end func()) {
	tok := fmt.Sprintf("%s#%d", id, s.calls.Add(1))
	params.ProgressToken = tok
	r := &progressRelay{say: say}
	s.pmu.Lock()
	if s.progress == nil {
		s.progress = map[string]*progressRelay{}
	}
	s.progress[tok] = r
	s.pmu.Unlock()
	return func() {
		s.pmu.Lock()
		delete(s.progress, tok)
		s.pmu.Unlock()
		r.end()
	}
}

// progressRelay hands one call's progress messages on until it ends.
type progressRelay struct {
	mu  sync.Mutex
	say func(string) // nil once the call ended
}

// send hands msg on, unless the call ended.
func (r *progressRelay) send(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.say != nil {
		r.say(msg)
	}
}

// end waits for a message being handed on and drops every later one.
func (r *progressRelay) end() {
	r.mu.Lock()
	r.say = nil
	r.mu.Unlock()
}

// endWait bounds waiting for a server that failed a call to be seen
// ending, for its last words.
const endWait = 3 * time.Second

// stderrWords is the end of the command's standard error, for an error.
func (s *server) stderrWords() string {
	s.mu.Lock()
	t := s.stderr
	s.mu.Unlock()
	return t.Words()
}

// result converts a tool's result: its text (mcpclient.Text), capped;
// an error result's text goes in Error too.
func result(res *mcpclient.CallToolResult) wire.HostResult {
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
