package greet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// holdAgent greets a fake agent running script after its hello's answer
// without a claim, as the pool does, and holds the connection.
func holdAgent(t *testing.T, script func(conn *websocket.Conn)) *Held {
	t.Helper()
	agent := startFakeAgent(t, func(conn *websocket.Conn) {
		hello := read(t, conn)
		_ = conn.WriteJSON(helloFrom("t_1", hello.ID, "i1"))
		script(conn)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g := newTestGreeter()
	conn, _, err := g.Dial(ctx, Target{Dirs: agent.dirs}, "t_1", false)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	return g.Hold(conn, "t_1")
}

// A claim on a held connection is one frame each way, and the connection
// is then the claimer's with nothing of it read ahead: the message the
// agent sends right behind its claimed is the claimer's to read. While
// held, the agent's pings are answered.
func TestHeldClaimIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	pinged := make(chan error, 1)
	h := holdAgent(t, func(conn *websocket.Conn) {
		pong := make(chan struct{}, 1)
		conn.SetPongHandler(func(string) error { pong <- struct{}{}; return nil })
		_ = conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Second))
		claim := read(t, conn) // the pong is handled inside this read
		select {
		case <-pong:
			pinged <- nil
		default:
			pinged <- errors.New("no pong before the claim")
		}
		var c wire.Claim
		if claim.Type != wire.TypeClaim || claim.Thread != "t_1" || claim.Decode(&c) != nil || c.LLMToken != "tok-box1" {
			t.Errorf("got %s for %q (%+v), want the claim of t_1 with box1's token", claim.Type, claim.Thread, c)
		}
		_ = conn.WriteJSON(wire.MustNew(wire.TypeClaimed, "t_1", claim.ID, nil))
		_ = conn.WriteJSON(wire.MustNew(wire.TypePong, "t_1", "after", nil))
		drain(conn)
	})
	time.Sleep(100 * time.Millisecond) // the ping and its pong while held
	if h.Thread() != "t_1" {
		t.Fatalf("Thread %q", h.Thread())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := h.Claim(ctx, "box1")
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	defer conn.Close()
	if err := <-pinged; err != nil {
		t.Error(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var env wire.Envelope
	if err := conn.ReadJSON(&env); err != nil || env.Type != wire.TypePong || env.ID != "after" {
		t.Fatalf("after the claim read %+v, %v: want the agent's next message", env, err)
	}
}

// A held connection that ended, or whose agent answered claimed before any
// claim, sends no token: Claim says ErrHeldGone, and the caller greets
// anew. A refused claim is the agent's answer, not ErrHeldGone.
func TestHeldClaimFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script func(t *testing.T, conn *websocket.Conn)
		gone   bool
	}{
		{"agent gone", func(_ *testing.T, conn *websocket.Conn) {}, true},
		{"claimed before any claim", func(t *testing.T, conn *websocket.Conn) {
			_ = conn.WriteJSON(wire.MustNew(wire.TypeClaimed, "t_1", "claim", nil))
			drainNoClaim(t, conn)
		}, true},
		{"claim refused", func(t *testing.T, conn *websocket.Conn) {
			claim := read(t, conn)
			_ = conn.WriteJSON(wire.ErrorEnvelope("t_1", claim.ID, wire.CodeNotAllowed, "no"))
			drain(conn)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := holdAgent(t, func(conn *websocket.Conn) { tc.script(t, conn) })
			time.Sleep(100 * time.Millisecond) // the agent's doing reaches the holder first
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, err := h.Claim(ctx, "box1")
			if err == nil {
				conn.Close()
				t.Fatal("Claim succeeded")
			}
			if gone := errors.Is(err, ErrHeldGone); gone != tc.gone {
				t.Fatalf("err %v: ErrHeldGone %v, want %v", err, gone, tc.gone)
			}
			if !tc.gone && !errors.Is(err, errAgentAnswer) {
				t.Fatalf("err %v, want errAgentAnswer", err)
			}
		})
	}
}

// drainNoClaim reads until the connection ends, failing on a claim.
func drainNoClaim(t *testing.T, conn *websocket.Conn) {
	_ = conn.SetReadDeadline(time.Time{})
	for {
		var env wire.Envelope
		if err := conn.ReadJSON(&env); err != nil {
			return
		}
		if env.Type == wire.TypeClaim {
			t.Errorf("the agent got a claim after its own claimed")
		}
	}
}

// Close ends a held connection no claim took: the agent sees it close,
// and Close returns once its reader has.
func TestHeldClose(t *testing.T) {
	t.Parallel()
	closed := make(chan int, 1)
	h := holdAgent(t, func(conn *websocket.Conn) {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _, err := conn.NextReader()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			closed <- ce.Code
			return
		}
		closed <- -1
	})
	h.Close()
	select {
	case code := <-closed:
		if code != websocket.CloseNormalClosure {
			t.Fatalf("agent saw close %d, want %d", code, websocket.CloseNormalClosure)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the agent saw no close")
	}
	select {
	case <-h.done:
	default:
		t.Fatal("Close returned before the reader ended")
	}
}
