package session

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/boxwire/boxwire/agent/hosttool"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Host tools (docs/tools.md): at the start of each turn the agent asks the
// thread's bridge connection which host tools the thread may use
// (host_tools_list → host_tools) and offers them to the model beside its
// own (loop.Config.TurnTools); a call goes to the bridge as host_call and
// waits for host_result, taking host_progress as its output on the way;
// an interrupted call sends host_cancel. A standalone agent has none.
//
// The same answer carries the MCP servers the thread declares
// (wire.HostTools.MCPServers): the function ThreadMCP gave starts them in
// the sandbox and returns their tools, offered before the host tools.

// hostListWait bounds waiting for the bridge's list at a turn's start (it
// may be starting its MCP servers).
const hostListWait = 45 * time.Second

// hostWaits are the host requests waiting for the bridge, by request id,
// and what starts the threads' MCP servers.
type hostWaits struct {
	mu        sync.Mutex
	next      uint64
	waiting   map[string]*hostWait
	threadMCP ThreadMCPFunc // ThreadMCP
}

// ThreadMCPFunc starts the MCP servers thread declares, decl, and returns
// their tools (mcptools.Servers.ForThread). It blocks while they start.
type ThreadMCPFunc func(ctx context.Context, thread string, decl []wire.MCPServer) []tools.Tool

// ThreadMCP has start run the MCP servers each thread declares, which
// its bridge names at each turn's start (docs/tools.md, "MCP servers a
// thread declares"); without it they are not run. Call it before the
// server serves.
func (s *Server) ThreadMCP(start ThreadMCPFunc) {
	s.hosts.mu.Lock()
	s.hosts.threadMCP = start
	s.hosts.mu.Unlock()
}

// hostWait is one request's answers: progress messages, then the end.
type hostWait struct {
	progress chan string        // dropped when full
	answer   chan wire.Envelope // host_tools or host_result, once
}

func (hw *hostWaits) add(prefix string) (string, *hostWait) {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	if hw.waiting == nil {
		hw.waiting = map[string]*hostWait{}
	}
	hw.next++
	id := prefix + strconv.FormatUint(hw.next, 10)
	w := &hostWait{progress: make(chan string, 64), answer: make(chan wire.Envelope, 1)}
	hw.waiting[id] = w
	return id, w
}

func (hw *hostWaits) remove(id string) {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	delete(hw.waiting, id)
}

// deliver hands a bridge's answer to its waiter; false if none waits.
func (hw *hostWaits) deliver(env wire.Envelope) bool {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	w, ok := hw.waiting[env.ID]
	if !ok {
		return false
	}
	if env.Type == wire.TypeHostProgress {
		var p wire.HostProgress
		if env.Decode(&p) == nil {
			select {
			case w.progress <- p.Message:
			default: // a call that streams faster than the turn emits loses progress, never its result
			}
		}
		return true
	}
	delete(hw.waiting, env.ID)
	w.answer <- env // buffered, one answer per id
	return true
}

// hostAnswer routes a host tool message from c: only the bridge answers.
func (c *conn) hostAnswer(env wire.Envelope) {
	if c.role != wire.RoleBridge {
		c.reply(wire.ErrorEnvelope(c.thread.name, env.ID, wire.CodeNotAllowed, "%s is between the agent and its bridge", env.Type))
		return
	}
	switch env.Type {
	case wire.TypeHostTools, wire.TypeHostResult, wire.TypeHostProgress:
		if !c.s.hosts.deliver(env) {
			c.log.Debug("host tool answer for no waiting request", "type", env.Type, "id", env.ID)
		}
	default:
		c.reply(wire.ErrorEnvelope(c.thread.name, env.ID, wire.CodeBadMessage, "%s goes from the agent to its bridge", env.Type))
	}
}

// hostTools returns the tools of the MCP servers the turn's thread (ctx's)
// declares, then its host tools; none when it has no bridge connection or
// the bridge does not answer in time.
func (s *Server) hostTools(ctx context.Context) []tools.Tool {
	t, _ := ctx.Value(threadKey{}).(*thread)
	if t == nil {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, hostListWait)
	defer cancel()
	env, err := t.askBridge(lctx, "htl_", wire.MustNew(wire.TypeHostToolsList, t.name, "", nil), nil)
	if err != nil {
		if !errors.Is(err, errNoBridge) {
			t.log.Warn("host tools not listed", "err", err)
		}
		return nil
	}
	var list wire.HostTools
	if err := env.Decode(&list); err != nil {
		t.log.Warn("bad host_tools from the bridge", "err", err)
		return nil
	}
	for _, e := range list.Errors {
		t.log.Warn("host tool server unavailable", "err", e)
	}
	s.hosts.mu.Lock()
	start := s.hosts.threadMCP
	s.hosts.mu.Unlock()
	var ts []tools.Tool
	if start != nil {
		ts = start(ctx, t.name, list.MCPServers) // none ends the thread's earlier ones
	}
	return append(ts, hosttool.Tools(list.Tools, hostCaller{t}, 0)...)
}

// hostCaller is a thread's hosttool.Caller.
type hostCaller struct{ t *thread }

// Call sends call to the bridge and waits for its result.
func (h hostCaller) Call(ctx context.Context, call wire.HostCall, progress func(string)) (wire.HostResult, error) {
	env, err := h.t.askBridge(ctx, "hc_", wire.MustNew(wire.TypeHostCall, h.t.name, "", call), progress)
	if err != nil {
		return wire.HostResult{}, err
	}
	var res wire.HostResult
	if err := env.Decode(&res); err != nil {
		return wire.HostResult{}, errors.New("the bridge's answer did not decode: " + err.Error())
	}
	return res, nil
}

// errNoBridge says the thread has no bridge connection (standalone).
var errNoBridge = errors.New("no bridge connection")

// askBridge sends env (its id set here) to the thread's bridge connection
// and waits for the answer with the same id, handing progress messages to
// progress on the way. When ctx ends first, a host_call is cancelled on
// the bridge (host_cancel) and ctx's error returned.
func (t *thread) askBridge(ctx context.Context, prefix string, env wire.Envelope, progress func(string)) (wire.Envelope, error) {
	if !t.hasHostBridge() {
		return wire.Envelope{}, errNoBridge
	}
	id, w := t.s.hosts.add(prefix)
	defer t.s.hosts.remove(id)
	env.ID = id
	c, refused := t.sendCheck(ctx, env) // approval.go: on a resumed bridge connection
	switch {
	case c == nil:
		return wire.Envelope{}, errNoBridge
	case refused != "":
		return wire.Envelope{}, errors.New(refused)
	}
	for {
		select {
		case msg := <-w.progress:
			if progress != nil {
				progress(msg)
			}
		case ans := <-w.answer:
			// Progress the bridge sent before its answer is already
			// queued (the reader hands both over in order); a select
			// that picked the answer first must not leave it behind.
			for {
				select {
				case msg := <-w.progress:
					if progress != nil {
						progress(msg)
					}
				default:
					return ans, nil
				}
			}
		case <-ctx.Done():
			if env.Type == wire.TypeHostCall {
				c.enqueue(outgoing{env: wire.MustNew(wire.TypeHostCancel, t.name, id, nil)})
			}
			return wire.Envelope{}, ctx.Err()
		case <-c.done:
			return wire.Envelope{}, errors.New("the bridge connection closed before the host tool answered")
		}
	}
}

// hasHostBridge reports whether a bridge connection of the thread answers
// host tool requests.
func (t *thread) hasHostBridge() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c := range t.conns {
		if c.hostTools {
			return true
		}
	}
	return false
}
