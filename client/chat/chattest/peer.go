package chattest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/gorilla/websocket"
)

// writeWait bounds each write of a Peer.
const writeWait = 5 * time.Second

// Peer is the server side of one connection. Recv must be called from one
// goroutine only (the handler's); the send methods are safe for concurrent
// use.
type Peer struct {
	ws *websocket.Conn

	mu     sync.Mutex // serializes writes, guards seq and thread
	seq    uint64
	thread string
	once   sync.Once
}

// Recv blocks until the next frame arrives or the connection ends.
func (p *Peer) Recv() (wire.Envelope, error) {
	_, data, err := p.ws.ReadMessage()
	if err != nil {
		return wire.Envelope{}, err
	}
	return wire.Parse(data)
}

// Send writes env as it is.
func (p *Peer) Send(env wire.Envelope) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.send(env)
}

func (p *Peer) send(env wire.Envelope) error {
	_ = p.ws.SetWriteDeadline(time.Now().Add(writeWait))
	return p.ws.WriteJSON(env)
}

// Event writes env as the next event of the thread: it stamps the thread
// and the next seq.
func (p *Peer) Event(env wire.Envelope) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	env.Seq = p.seq
	env.Thread = p.thread
	return p.send(env)
}

// SetSeq sets the seq of the last event sent, e.g. to honour after_seq.
func (p *Peer) SetSeq(seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq = seq
}

// Handshake reads the client's hello and answers with a hello bound to
// thread (the client's thread when empty, "t_test" when both are). It
// returns the client's hello.
func (p *Peer) Handshake(thread string) (wire.Hello, error) {
	env, err := p.Recv()
	if err != nil {
		return wire.Hello{}, err
	}
	if env.Type != wire.TypeHello {
		return wire.Hello{}, fmt.Errorf("first message is %q, not hello", env.Type)
	}
	var h wire.Hello
	if err := env.Decode(&h); err != nil {
		return wire.Hello{}, err
	}
	if h.Version != wire.Version || h.Role != wire.RoleClient {
		return h, errors.New("bad client hello")
	}
	for _, t := range []string{h.Thread, "t_test"} {
		if thread == "" {
			thread = t
		}
	}
	p.mu.Lock()
	p.thread = thread
	p.mu.Unlock()
	return h, p.Send(wire.MustNew(wire.TypeHello, thread, "", wire.Hello{
		Version: wire.Version, Role: wire.RoleBridge, Software: "chattest", Thread: thread,
	}))
}

// Close closes the connection at once, without a close frame. Idempotent.
func (p *Peer) Close() {
	p.once.Do(func() { _ = p.ws.Close() })
}

// SendBinary writes data as one binary frame (e.g. a terminal frame).
func (p *Peer) SendBinary(data []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.ws.SetWriteDeadline(time.Now().Add(writeWait))
	return p.ws.WriteMessage(websocket.BinaryMessage, data)
}

// RecvFrame is Recv for a peer that may get binary frames: it returns the
// frame's kind (websocket.TextMessage or BinaryMessage) and bytes.
func (p *Peer) RecvFrame() (kind int, data []byte, err error) {
	return p.ws.ReadMessage()
}
