package chat_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/chat/chattest"
)

// copier is a Receiver that copies every binary frame it is given (its
// data is valid only during the call) and consumes no message.
type copier struct {
	mu     sync.Mutex
	frames [][]byte
}

func (c *copier) Binary(data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frames = append(c.frames, bytes.Clone(data))
}

func (c *copier) Message(wire.Envelope) bool { return false }

// TestBinaryFramesOfEverySize: the reader reads binary frames into a
// buffer it reuses; frames that shrink, grow past what it keeps, and
// alternate with messages each arrive whole and exact, and a message on
// Events is not changed by the frames read after it.
func TestBinaryFramesOfEverySize(t *testing.T) {
	t.Parallel()
	sizes := []int{1, 70000, 10, wire.MaxFrameData + 300, 5000, 3 * wire.MaxFrameData, 0, 4096, 2}
	frame := func(i, n int) []byte {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(i*31 + j*7)
		}
		return b
	}
	srv := chattest.New(t, chattest.Options{Handler: func(p *chattest.Peer) {
		if _, err := p.Handshake("t_frames"); err != nil {
			return
		}
		for i, n := range sizes {
			if err := p.SendBinary(frame(i, n)); err != nil {
				return
			}
			if i == 1 {
				_ = p.Event(wire.MustNew(wire.TypeAssistantDelta, "", "", wire.Text{Text: "between frames"}))
			}
		}
		_ = p.Event(wire.MustNew(wire.TypeTurnDone, "", "", wire.TurnDone{Reason: wire.ReasonStop}))
		_, _, _ = p.RecvFrame() // until the client closes
	}})
	rcv := &copier{}
	c := dial(t, chat.Config{URL: srv.URL, Receiver: rcv})
	delta, ok := next(t, c)
	if !ok || delta.Type != wire.TypeAssistantDelta {
		t.Fatalf("first on Events: %v %v, want assistant_delta", delta.Type, ok)
	}
	if done, ok := next(t, c); !ok || done.Type != wire.TypeTurnDone {
		t.Fatalf("second on Events: %v %v, want turn_done", done.Type, ok)
	}
	var text wire.Text
	if err := delta.Decode(&text); err != nil || text.Text != "between frames" {
		t.Errorf("assistant_delta after the frames: %q, %v", text.Text, err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.frames) != len(sizes) {
		t.Fatalf("%d frames, want %d", len(rcv.frames), len(sizes))
	}
	for i, n := range sizes {
		if want := frame(i, n); !bytes.Equal(rcv.frames[i], want) {
			t.Errorf("frame %d: %s, want %d bytes", i, describe(rcv.frames[i], want), n)
		}
	}
}

func describe(got, want []byte) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d bytes", len(got))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Sprintf("byte %d is %d, not %d", i, got[i], want[i])
		}
	}
	return "equal"
}
