package session

import (
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// readPump performs the handshake and then routes requests until the
// connection fails or must close.
func (c *conn) readPump() {
	c.ws.SetReadLimit(maxFrameBytes)
	c.ws.SetPongHandler(func(string) error { return c.ws.SetReadDeadline(time.Now().Add(pongWait)) })
	if err := c.ws.SetReadDeadline(time.Now().Add(helloWait)); err != nil {
		return
	}
	if !c.handshake() {
		return
	}
	name := c.thread.name
	for {
		env, err := c.next()
		if err != nil {
			reply, ok := frameError(name, err)
			if !ok {
				c.logReadEnd(err)
				return
			}
			c.reply(reply)
			continue
		}
		if !c.awaitStart(env.Type) {
			return
		}
		c.handle(env)
	}
}

// awaitStart blocks the reader until the agent's start is complete
// (Config.Started: its thread reserve made) before the first request that
// can start a process — a turn, a tool, a terminal — so no command can use
// up the sandbox's pids limit before the reserve exists. The hello, a ping
// and the bridge's claim are answered without it: a new sandbox's thread is
// ready without waiting for the reserve, which its first command (a model
// answer later) finds made. It reports false when the server stops first.
func (c *conn) awaitStart(typ wire.Type) bool {
	started := c.s.cfg.Started
	if started == nil || !startsProcesses(typ) {
		return true
	}
	select {
	case <-started:
		return true
	case <-c.s.hard.Done():
		return false
	}
}

// startsProcesses reports whether a request of type typ can start a
// process in the sandbox (awaitStart): a turn's tools, run_tool, and every
// terminal request but the list. Pings, the claim, history and resume,
// interrupts, verdicts, host tools' answers and port streams cannot.
func startsProcesses(typ wire.Type) bool {
	switch {
	case typ == wire.TypeUserMessage, typ == wire.TypeRunTool:
		return true
	case typ == wire.TypeTerminalList:
		return false
	default:
		return wire.IsTerminal(typ)
	}
}

// handshake reads the hello, binds the connection to its thread and
// answers; on any problem it answers with an error, closes and reports
// false.
func (c *conn) handshake() bool {
	env, err := c.next()
	if err != nil {
		reply, ok := frameError("", err)
		if !ok {
			c.logReadEnd(err)
			return false
		}
		return c.closeWith(reply)
	}
	if env.Type != wire.TypeHello {
		return c.closeWith(wire.ErrorEnvelope("", env.ID, wire.CodeBadMessage, "the first message must be hello, not %q", env.Type))
	}
	var h wire.Hello
	if err := env.Decode(&h); err != nil {
		return c.closeWith(wire.ErrorEnvelope("", env.ID, wire.CodeBadMessage, "%s", err.Error()))
	}
	if h.Version != wire.Version {
		return c.closeWith(wire.ErrorEnvelope("", env.ID, wire.CodeVersionMismatch, "this agent speaks protocol version %d, not %d", wire.Version, h.Version))
	}
	name := h.Thread
	if name == "" {
		name = DefaultThread
	}
	c.role = h.Role // before attach: checks look for the bridge among the thread's conns
	if c.role == wire.RoleBridge {
		c.shrinkSendBuffer()
	}
	c.hostTools = h.Role == wire.RoleBridge && h.HostTools // hosttools.go
	c.thread = c.s.thread(name)
	c.log = c.log.With("thread", name)
	c.startForward() // forward.go
	var hash string
	if c.s.cfg.AgentHash != nil {
		hash = c.s.cfg.AgentHash()
	}
	c.thread.attach(c, wire.MustNew(wire.TypeHello, name, env.ID, wire.Hello{
		Version:   wire.Version,
		Role:      wire.RoleAgent,
		Software:  c.s.cfg.Software,
		Thread:    name,
		Posture:   c.s.cfg.Posture,
		Instance:  c.s.instance,
		AgentHash: hash,
	}))
	c.log.Debug("connection attached", "role", h.Role, "software", h.Software)
	if c.s.cfg.Greeted != nil {
		c.s.greeted.Do(func() {
			if c.s.track() {
				go func() {
					defer c.s.wg.Done()
					c.s.cfg.Greeted()
				}()
			}
		})
	}
	c.s.watchPorts() // forward.go
	return true
}

// handle routes one request from a bound connection.
func (c *conn) handle(env wire.Envelope) {
	name := c.thread.name
	if wire.IsTerminal(env.Type) {
		c.terminal(env)
		return
	}
	if wire.IsStream(env.Type) {
		c.forward(env) // forward.go
		return
	}
	switch env.Type {
	case wire.TypeUserMessage:
		var m wire.UserMessage
		if err := env.Decode(&m); err != nil {
			c.reply(wire.ErrorEnvelope(name, env.ID, wire.CodeBadMessage, "%s", err.Error()))
			return
		}
		if m.Text == "" {
			c.reply(wire.ErrorEnvelope(name, env.ID, wire.CodeBadMessage, "user_message: empty text"))
			return
		}
		c.thread.startTurn(c, env.ID, m.Text)
	case wire.TypeRunTool:
		var r wire.RunTool
		if err := env.Decode(&r); err != nil || r.Name == "" {
			c.reply(wire.ErrorEnvelope(name, env.ID, wire.CodeBadMessage, "run_tool needs a tool name and arguments"))
			return
		}
		c.thread.runTool(c, env.ID, r)
	case wire.TypeHistory:
		c.thread.applyHistory(c, env)
	case wire.TypeResume:
		c.thread.resume(c, env) // backlog.go
	case wire.TypeClaim:
		c.claim(env) // claim.go
	case wire.TypeInterrupt:
		c.thread.interrupt()
	case wire.TypeToolVerdict:
		c.verdict(env)
	case wire.TypeHostTools, wire.TypeHostResult, wire.TypeHostProgress,
		wire.TypeHostToolsList, wire.TypeHostCall, wire.TypeHostCancel:
		c.hostAnswer(env) // hosttools.go
	case wire.TypePing:
		c.reply(wire.MustNew(wire.TypePong, name, env.ID, nil))
	case wire.TypeHello:
		c.reply(wire.ErrorEnvelope(name, env.ID, wire.CodeBadMessage, "hello was already exchanged"))
	default:
		if !wire.Known(env.Type) {
			c.reply(wire.ErrorEnvelope(name, env.ID, wire.CodeUnknownType, "unknown message type %q", env.Type))
			return
		}
		c.reply(wire.ErrorEnvelope(name, env.ID, wire.CodeBadMessage, "%q is not a request", env.Type))
	}
}
