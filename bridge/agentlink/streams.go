package agentlink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Port streams (docs/protocol.md, "Ports and streams"): the link opens
// TCP connections to ports on the sandbox's loopback through its agent
// and carries their bytes on the agent connection, each stream within its
// credit window (wire.Inbox, wire.Credit). The link's reader only appends
// to a stream's inbox, which the window bounds, so a stream nobody reads
// stalls only itself: neither the conversation nor another stream waits
// for it. The writer drains the streams' queue beside requests and input.
const (
	// DefaultMaxStreams bounds a thread's open streams.
	DefaultMaxStreams = 256
	// streamQueueLen and streamBudget bound the queue of stream traffic
	// towards the agent: items, and bytes of frames.
	streamQueueLen = 8192
	streamBudget   = 16 << 20
	// openWait bounds waiting for the agent to answer port_open or
	// port_list, on top of the caller's context.
	openWait = 15 * time.Second
	// streamIDPrefix starts the ids of the link's stream requests, so
	// that their answers (and errors) are told from clients' replies.
	streamIDPrefix = "~s"
)

// ErrAgentGone ends streams and stream requests when the agent
// connection they travel on ends.
var ErrAgentGone = errors.New("the sandbox's agent connection ended")

// Streams are a link's port streams: the open streams and the stream
// requests waiting for the agent's answer (Link.Streams). They are safe
// for concurrent use.
type Streams struct {
	thread string
	dead   func() <-chan struct{} // the link's Dead
	log    *slog.Logger

	// out is the traffic towards the agent, in order. Most threads never
	// open a stream, so it is made on first use (queue); kick (the link's)
	// has the writer drain it. made is set once it is made; the writer
	// looks at out only then (made).
	outOnce sync.Once
	out     *wire.Queue[wire.Envelope]
	made    atomic.Bool
	kick    func()
	max     int

	mu      sync.Mutex
	next    uint64
	open    map[string]*Stream            // made with waiting on first use (maps)
	waiting map[string]chan wire.Envelope // answers to port_open and port_list, by request id
}

func newStreams(l *Link, max int) *Streams {
	if max <= 0 {
		max = DefaultMaxStreams
	}
	return &Streams{thread: l.id, dead: l.Dead, log: l.log, kick: l.kick, max: max}
}

// Streams returns the link's port streams.
func (l *Link) Streams() *Streams { return l.streams }

// queue is s.out, made on the first call. It is safe for concurrent use.
func (s *Streams) queue() *wire.Queue[wire.Envelope] {
	s.outOnce.Do(func() {
		s.out = wire.NewQueue[wire.Envelope](streamQueueLen, streamBudget)
		s.out.OnPush(s.kick)
		s.made.Store(true)
	})
	return s.out
}

// maps makes the maps of open streams and requests on their first use
// (most threads never open a stream); s.mu is held.
func (s *Streams) maps() {
	if s.open == nil {
		s.open, s.waiting = map[string]*Stream{}, map[string]chan wire.Envelope{}
	}
}

// pending is s.out for the writer, nil while no stream was ever opened.
func (s *Streams) pending() *wire.Queue[wire.Envelope] {
	if !s.made.Load() {
		return nil
	}
	return s.out
}

// Dial opens a stream to port on the sandbox's own loopback and
// returns it as a net.Conn once the agent connected it. It blocks until
// then, ctx ends, or the agent answers otherwise: a wire.Error of code
// wire.CodePortClosed when nothing listens there, wire.CodeStreamLimit
// when the thread has its maximum of streams open. The caller closes the
// stream; it also ends when the agent connection does.
func (s *Streams) Dial(ctx context.Context, port int) (*Stream, error) {
	if port < 1 || port > 65535 {
		return nil, wire.Error{Code: wire.CodeBadMessage, Message: fmt.Sprintf("port %d is not 1 to 65535", port)}
	}
	s.mu.Lock()
	if len(s.open) >= s.max {
		s.mu.Unlock()
		return nil, wire.Error{Code: wire.CodeStreamLimit, Message: fmt.Sprintf("the thread already has its maximum of %d open streams", s.max)}
	}
	s.next++
	id := streamIDPrefix + strconv.FormatUint(s.next, 10)
	st := newStream(s, id, port)
	s.maps()
	s.open[id] = st
	answer := make(chan wire.Envelope, 1)
	s.waiting[id] = answer
	s.mu.Unlock()

	env := wire.MustNew(wire.TypePortOpen, s.thread, id, wire.PortOpen{Stream: id, Port: port, Limits: &wire.OfferedStreamLimits})
	got, err := s.request(ctx, id, answer, env)
	if err == nil && got.Type != wire.TypePortOpened {
		err = answerError(got)
	}
	select {
	case <-st.done: // the agent's limits broke the rules (message, agree)
		if err == nil {
			err = st.failure()
		}
	default:
	}
	if err != nil {
		st.drop(err)
		return nil, err
	}
	return st, nil
}

// Ports asks the agent what listens in the sandbox. It blocks until the
// answer, ctx's end or the agent connection's.
func (s *Streams) Ports(ctx context.Context) ([]wire.Port, error) {
	s.mu.Lock()
	s.next++
	id := streamIDPrefix + strconv.FormatUint(s.next, 10)
	answer := make(chan wire.Envelope, 1)
	s.maps()
	s.waiting[id] = answer
	s.mu.Unlock()
	got, err := s.request(ctx, id, answer, wire.MustNew(wire.TypePortList, s.thread, id, nil))
	if err != nil {
		return nil, err
	}
	if got.Type != wire.TypePorts {
		return nil, answerError(got)
	}
	var p wire.Ports
	if err := got.Decode(&p); err != nil {
		return nil, fmt.Errorf("ports from the agent: %w", err)
	}
	return p.Ports, nil
}

// request queues env and waits for its answer.
func (s *Streams) request(ctx context.Context, id string, answer chan wire.Envelope, env wire.Envelope) (wire.Envelope, error) {
	defer func() {
		s.mu.Lock()
		delete(s.waiting, id)
		s.mu.Unlock()
	}()
	if !s.queue().Send(env) {
		return wire.Envelope{}, wire.Error{Code: wire.CodeSandboxUnavailable, Message: "the agent is not taking stream requests"}
	}
	timer := time.NewTimer(openWait)
	defer timer.Stop()
	select {
	case got := <-answer:
		return got, nil
	case <-s.dead():
		return wire.Envelope{}, wire.Error{Code: wire.CodeSandboxUnavailable, Message: ErrAgentGone.Error()}
	case <-timer.C:
		return wire.Envelope{}, wire.Error{Code: wire.CodeSandboxUnavailable, Message: fmt.Sprintf("the agent did not answer %s within %s", env.Type, openWait)}
	case <-ctx.Done():
		return wire.Envelope{}, ctx.Err()
	}
}

// answerError is the error an agent's answer other than the one hoped
// for says: a stream_close's code and message, or an error's.
func answerError(env wire.Envelope) error {
	var c wire.StreamClose
	if env.Type == wire.TypeStreamClose && env.Decode(&c) == nil && c.Code != "" {
		return wire.Error{Code: c.Code, Message: c.Message}
	}
	var e wire.Error
	if env.Type == wire.TypeError && env.Decode(&e) == nil {
		return e
	}
	return wire.Error{Code: wire.CodeInternal, Message: fmt.Sprintf("the agent answered %s", env.Type)}
}

// isStreamMessage reports whether env from the agent is the streams':
// a stream control message, a ports reply, or an error answering one of
// the link's stream requests.
func isStreamMessage(env wire.Envelope) bool {
	switch {
	case wire.IsStream(env.Type):
		return true
	case env.Seq == 0 && (env.Type == wire.TypePorts || env.Type == wire.TypeError):
		return strings.HasPrefix(env.ID, streamIDPrefix)
	}
	return false
}

// message takes a stream message from the agent (the link's reader).
func (s *Streams) message(env wire.Envelope) {
	s.mu.Lock()
	answer := s.waiting[env.ID]
	delete(s.waiting, env.ID)
	opened := s.open[env.ID] // a port_open's id is its stream's
	s.mu.Unlock()
	if answer != nil {
		if env.Type == wire.TypePortOpened && opened != nil {
			var ref wire.StreamRef
			_ = env.Decode(&ref)     // a bad payload offers nothing
			opened.agree(ref.Limits) // before the reader takes the stream's first frame
		}
		answer <- env // buffered, and each request gets one answer
		return
	}
	if env.Type != wire.TypeStreamClose && env.Type != wire.TypePortOpened {
		return
	}
	var ref wire.StreamClose
	if err := env.Decode(&ref); err != nil {
		return
	}
	s.mu.Lock()
	st := s.open[ref.Stream]
	s.mu.Unlock()
	switch {
	case st != nil && env.Type == wire.TypeStreamClose:
		err := error(errStreamEnded)
		if ref.Code != "" {
			err = wire.Error{Code: ref.Code, Message: ref.Message}
		}
		st.drop(err)
	case st == nil && env.Type == wire.TypePortOpened: // opened after it was given up
		s.queue().Send(wire.MustNew(wire.TypeStreamClose, env.Thread, "", wire.StreamClose{Stream: ref.Stream}))
	}
}

// errStreamEnded ends a stream the agent closed plainly.
var errStreamEnded = errors.New("stream closed by the sandbox")

// frame takes a stream frame from the agent (the link's reader); it never
// blocks. A frame that breaks the window closes its stream.
func (s *Streams) frame(f wire.Frame) {
	s.mu.Lock()
	st := s.open[f.Session]
	s.mu.Unlock()
	if st == nil {
		return // ended here; the agent has been told
	}
	if err := f.Take(st.in, st.credit); err != nil {
		st.fail(wire.CodeBadMessage, err.Error())
	}
}

// refuseStream answers a client's stream request, which the thread
// relayed: clients of a bridge reach ports over HTTP, and only the link
// opens streams on its agent connection.
func (l *Link) refuseStream(env wire.Envelope) {
	l.fromAgent(wire.ErrorEnvelope(l.id, env.ID, wire.CodeNotAllowed,
		"%s is between the bridge and the agent: reach a port over HTTP (/v1/threads/{id}/ports/{port}/ or /v1/threads/{id}/forward/{port})", env.Type))
}

// parseFrame parses a stream frame from the agent (the link's reader)
// and hands it on.
func (s *Streams) parseFrame(data []byte) {
	f, err := wire.ParseFrame(data)
	if err != nil {
		s.log.Warn("bad stream frame from agent", "err", err)
		return
	}
	s.frame(f)
}

// lost ends every stream and stream request: the agent connection ended.
func (s *Streams) lost() {
	s.mu.Lock()
	open := make([]*Stream, 0, len(s.open))
	for _, st := range s.open {
		open = append(open, st)
	}
	s.mu.Unlock()
	for _, st := range open {
		st.drop(ErrAgentGone)
	}
}

// Open reports how many streams the thread has open.
func (s *Streams) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// write writes one queued item of stream traffic to the agent (the
// link's writer).
func (s *Streams) write(c *connection, it wire.Item[wire.Envelope]) error {
	s.queue().Release(it)
	w := wire.Writer{Conn: c.ws, Wait: writeWait}
	if it.Msg != nil {
		return w.JSON(*it.Msg)
	}
	return w.Binary(it.Frame)
}
