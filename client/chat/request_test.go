package chat_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/chat/chattest"
)

// answering is a server that answers each request by its type: "ask" gets
// an event with the request's id (not the answer) then a terminal_list
// reply, "fail" an error reply, ping a pong, "hang" nothing, "drop" a
// closed connection.
func answering(p *chattest.Peer) {
	if _, err := p.Handshake("t_req"); err != nil {
		return
	}
	for {
		env, err := p.Recv()
		if err != nil {
			return
		}
		switch env.Type {
		case "ask":
			_ = p.Event(wire.MustNew(wire.TypeAssistantDelta, "", env.ID, wire.Text{Text: "not the answer"}))
			_ = p.Send(wire.MustNew(wire.TypeTerminalSessions, env.Thread, env.ID, wire.TerminalSessions{}))
		case "fail":
			_ = p.Send(wire.ErrorEnvelope(env.Thread, env.ID, wire.CodeNotFound, "no such thing"))
		case wire.TypePing:
			_ = p.Send(wire.Envelope{Type: wire.TypePong, Thread: env.Thread, ID: env.ID})
		case "drop":
			p.Close()
			return
		}
	}
}

func TestRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		typ      wire.Type
		ctx      time.Duration // 0: the test's deadline
		close    bool          // Close the connection while waiting
		wantType wire.Type     // the answer's type
		wantCode wire.Code     // the wire.Error code
		wantErr  error         // errors.Is
		anyErr   bool          // some error (the read error of a dropped connection)
	}{
		{name: "answer", typ: "ask", wantType: wire.TypeTerminalSessions},
		{name: "error reply", typ: "fail", wantType: wire.TypeError, wantCode: wire.CodeNotFound},
		{name: "ctx ends", typ: "hang", ctx: 50 * time.Millisecond, wantErr: context.DeadlineExceeded},
		{name: "closed while waiting", typ: "hang", close: true, wantErr: chat.ErrClosed},
		{name: "connection lost", typ: "drop", anyErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := chattest.New(t, chattest.Options{Handler: answering})
			c := dial(t, chat.Config{URL: srv.URL})
			ctx := testCtx(t)
			if tt.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctx)
				defer cancel()
			}
			if tt.close {
				time.AfterFunc(50*time.Millisecond, func() { c.Close() })
			}
			reply, err := c.Request(ctx, wire.Envelope{Type: tt.typ})
			var werr wire.Error
			switch {
			case tt.wantCode != "":
				if !errors.As(err, &werr) || werr.Code != tt.wantCode {
					t.Fatalf("err = %v, want a wire.Error %s", err, tt.wantCode)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			case tt.anyErr:
				if err == nil || errors.As(err, &werr) {
					t.Fatalf("err = %v, want the connection's end", err)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			}
			if reply.Type != tt.wantType {
				t.Errorf("answer %q, want %q", reply.Type, tt.wantType)
			}
			if tt.wantType != "" && reply.ID == "" {
				t.Error("answer without the request's id")
			}
		})
	}
}

// TestRequestAnswerRouting: the Receiver sees the answer before Request
// returns; the answer does not go on to Events, the request's events do.
func TestRequestAnswerRouting(t *testing.T) {
	t.Parallel()
	srv := chattest.New(t, chattest.Options{Handler: answering})
	rcv := &recorder{}
	c := dial(t, chat.Config{URL: srv.URL, Receiver: rcv})
	reply, err := c.Request(testCtx(t), wire.Envelope{Type: "ask", ID: "mine"})
	if err != nil || reply.ID != "mine" || reply.Thread != "t_req" {
		t.Fatalf("Request = %+v, %v; want the answer to id mine on t_req", reply, err)
	}
	if want := "msg:assistant_delta msg:terminal_sessions"; rcv.seen() != want {
		t.Errorf("receiver saw %q before Request returned, want %q", rcv.seen(), want)
	}
	if env, ok := next(t, c); !ok || env.Type != wire.TypeAssistantDelta {
		t.Fatalf("Events: %v %v, want the assistant_delta event", env.Type, ok)
	}
	if _, err := c.Ping(testCtx(t)); err != nil { // pongs follow any answer
		t.Fatalf("ping: %v", err)
	}
	select {
	case env := <-c.Events():
		t.Errorf("Events delivered %s after the event; answers must not be delivered", env.Type)
	default:
	}
}
