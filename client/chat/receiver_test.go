package chat_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/chat/chattest"
)

// recorder is a Receiver that notes what it saw and consumes the message
// types in consume.
type recorder struct {
	consume map[wire.Type]bool
	panicOn wire.Type

	mu  sync.Mutex
	got []string
}

func (r *recorder) Binary(data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, "bin:"+string(data))
}

func (r *recorder) Message(env wire.Envelope) bool {
	if env.Type == r.panicOn {
		panic("receiver bug")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, "msg:"+string(env.Type))
	return r.consume[env.Type]
}

func (r *recorder) seen() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.got, " ")
}

// TestReceiver: binary frames and messages reach the Receiver in arrival
// order; consumed messages skip Events, the others follow; SendBinary
// arrives as a binary frame.
func TestReceiver(t *testing.T) {
	t.Parallel()
	fromClient := make(chan string, 1)
	srv := chattest.New(t, chattest.Options{Handler: func(p *chattest.Peer) {
		if _, err := p.Handshake("t_rcv"); err != nil {
			return
		}
		_ = p.SendBinary([]byte("one"))
		_ = p.Event(wire.MustNew(wire.TypeAssistantDelta, "", "", wire.Text{Text: "x"}))
		_ = p.SendBinary([]byte("two"))
		_ = p.Send(wire.ErrorEnvelope("", "r-1", wire.CodeNotFound, "no"))
		_ = p.Event(wire.MustNew(wire.TypeTurnDone, "", "", wire.TurnDone{Reason: wire.ReasonStop}))
		kind, data, err := p.RecvFrame()
		if err == nil && kind == websocket.BinaryMessage {
			fromClient <- string(data)
		}
		close(fromClient)
		_, _, _ = p.RecvFrame() // until the client closes
	}})
	rcv := &recorder{consume: map[wire.Type]bool{wire.TypeError: true, wire.TypeAssistantDelta: true}}
	c := dial(t, chat.Config{URL: srv.URL, Receiver: rcv})
	env, ok := next(t, c)
	if !ok || env.Type != wire.TypeTurnDone {
		t.Fatalf("first on Events: %v %v, want turn_done (the rest consumed)", env.Type, ok)
	}
	if want := "bin:one msg:assistant_delta bin:two msg:error msg:turn_done"; rcv.seen() != want {
		t.Errorf("receiver saw %q, want %q", rcv.seen(), want)
	}
	if c.LastSeq() != 2 {
		t.Errorf("LastSeq %d, want 2: the seq of the last event on Events", c.LastSeq())
	}
	if err := c.SendBinary(testCtx(t), []byte("keys")); err != nil {
		t.Fatalf("SendBinary: %v", err)
	}
	select {
	case got := <-fromClient:
		if got != "keys" {
			t.Errorf("server got binary %q", got)
		}
	case <-testCtx(t).Done():
		t.Fatal("server got no binary frame")
	}
}

// TestReceiverPanicEndsConnection: a panicking Receiver ends the
// connection with an error, not the process.
func TestReceiverPanicEndsConnection(t *testing.T) {
	t.Parallel()
	srv := chattest.New(t, chattest.Options{Handler: func(p *chattest.Peer) {
		if _, err := p.Handshake("t_rcv"); err != nil {
			return
		}
		_ = p.Event(wire.MustNew(wire.TypeAssistantDelta, "", "", wire.Text{Text: "x"}))
		_, _, _ = p.RecvFrame()
	}})
	c := dial(t, chat.Config{URL: srv.URL, Receiver: &recorder{panicOn: wire.TypeAssistantDelta}})
	select {
	case <-c.Done():
	case <-testCtx(t).Done():
		t.Fatal("connection did not end")
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "receiver panicked") {
		t.Errorf("Err = %v, want a receiver panic", err)
	}
	if _, ok := next(t, c); ok {
		t.Error("Events not closed")
	}
}

// TestBinaryWithoutReceiver: binary frames are dropped, Events goes on.
func TestBinaryWithoutReceiver(t *testing.T) {
	t.Parallel()
	srv := chattest.New(t, chattest.Options{Handler: func(p *chattest.Peer) {
		if _, err := p.Handshake("t_rcv"); err != nil {
			return
		}
		_ = p.SendBinary([]byte("dropped"))
		_ = p.Event(wire.MustNew(wire.TypeTurnDone, "", "", wire.TurnDone{Reason: wire.ReasonStop}))
		_, _, _ = p.RecvFrame()
	}})
	c := dial(t, chat.Config{URL: srv.URL})
	if env, ok := next(t, c); !ok || env.Type != wire.TypeTurnDone {
		t.Fatalf("Events: %v %v, want turn_done", env.Type, ok)
	}
}
