package chat_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/chat/chattest"
)

func TestRunCollectsTurn(t *testing.T) {
	t.Parallel()
	srv := chattest.New(t, chattest.Options{Token: "tok", Handler: chattest.Scripted("", turn)})
	c := dial(t, chat.Config{URL: srv.URL, Token: "tok"})
	for i, text := range []string{"hello", "again"} {
		var got []wire.Envelope
		done, err := c.Run(testCtx(t), text, func(env wire.Envelope) { got = append(got, env) })
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if done.Reason != wire.ReasonStop || done.Usage == nil || done.Usage.TotalTokens != 42 {
			t.Errorf("turn_done = %+v", done)
		}
		want := []wire.Type{wire.TypeUserEcho, wire.TypeAssistantDelta, wire.TypeAssistantDelta,
			wire.TypeAssistantMessage, wire.TypeToolCall, wire.TypeToolOutput, wire.TypeToolResult, wire.TypeTurnDone}
		if len(got) != len(want) {
			t.Fatalf("got %d events, want %d", len(got), len(want))
		}
		for j, env := range got {
			if env.Type != want[j] || env.ID != got[0].ID || env.Thread != "t_test" {
				t.Errorf("event %d = %s id %q thread %q, want %s id %q", j, env.Type, env.ID, env.Thread, want[j], got[0].ID)
			}
			if wantSeq := uint64(i*len(want) + j + 1); env.Seq != wantSeq {
				t.Errorf("event %d seq = %d, want %d", j, env.Seq, wantSeq)
			}
		}
		var echo wire.UserMessage
		if err := got[0].Decode(&echo); err != nil || echo.Text != text {
			t.Errorf("user_echo = %q, %v", echo.Text, err)
		}
		if c.LastSeq() != got[len(got)-1].Seq {
			t.Errorf("LastSeq() = %d, want %d", c.LastSeq(), got[len(got)-1].Seq)
		}
	}
}

func TestRunBusyAndInterrupt(t *testing.T) {
	t.Parallel()
	long := func(string) []wire.Envelope { return []wire.Envelope{{Type: chattest.WaitInterrupt}} }
	srv := chattest.New(t, chattest.Options{Handler: chattest.Scripted("", long)})
	c := dial(t, chat.Config{URL: srv.URL})
	ctx := testCtx(t)
	first, err := c.SendMessage(ctx, "long job")
	if err != nil {
		t.Fatal(err)
	}
	if env, _ := next(t, c); env.Type != wire.TypeUserEcho || env.ID != first {
		t.Fatalf("got %s %q, want user_echo %q", env.Type, env.ID, first)
	}
	_, err = c.Run(ctx, "second", nil)
	var werr wire.Error
	if !errors.As(err, &werr) || werr.Code != wire.CodeBusy {
		t.Fatalf("run during a turn: err = %v, want busy", err)
	}
	if err := c.Interrupt(ctx); err != nil {
		t.Fatal(err)
	}
	env, _ := next(t, c)
	var done wire.TurnDone
	if env.Type != wire.TypeTurnDone || env.ID != first || env.Decode(&done) != nil || done.Reason != wire.ReasonInterrupted {
		t.Fatalf("got %s %q %s, want turn_done interrupted for %q", env.Type, env.ID, env.Data, first)
	}
}

func TestRunTurnError(t *testing.T) {
	t.Parallel()
	failing := func(string) []wire.Envelope {
		return []wire.Envelope{
			wire.ErrorEnvelope("", "", wire.CodeLLM, "model endpoint: 500"),
			wire.MustNew(wire.TypeTurnDone, "", "", wire.TurnDone{Reason: wire.ReasonError}),
		}
	}
	srv := chattest.New(t, chattest.Options{Handler: chattest.Scripted("", failing)})
	c := dial(t, chat.Config{URL: srv.URL})
	done, err := c.Run(testCtx(t), "hi", nil)
	var werr wire.Error
	if !errors.As(err, &werr) || werr.Code != wire.CodeLLM {
		t.Fatalf("err = %v, want llm_error", err)
	}
	if done.Reason != wire.ReasonError {
		t.Errorf("reason = %q, want error", done.Reason)
	}
}

func TestEventsClosedWhenServerGoesAway(t *testing.T) {
	t.Parallel()
	long := func(string) []wire.Envelope { return []wire.Envelope{{Type: chattest.WaitInterrupt}} }
	srv := chattest.New(t, chattest.Options{Handler: chattest.Scripted("", long)})
	c := dial(t, chat.Config{URL: srv.URL})
	if _, err := c.SendMessage(testCtx(t), "x"); err != nil {
		t.Fatal(err)
	}
	if env, _ := next(t, c); env.Type != wire.TypeUserEcho {
		t.Fatalf("got %s, want user_echo", env.Type)
	}
	srv.DropAll()
	if env, ok := next(t, c); ok {
		t.Fatalf("got %s after the server went away, want Events closed", env.Type)
	}
	if err := c.Err(); err == nil || errors.Is(err, chat.ErrClosed) {
		t.Errorf("Err() = %v, want the read error", err)
	}
	if c.LastSeq() != 1 {
		t.Errorf("LastSeq() = %d, want 1", c.LastSeq())
	}
	if err := c.Interrupt(testCtx(t)); err == nil {
		t.Error("Interrupt on a dead connection succeeded")
	}
	if _, err := c.Ping(testCtx(t)); err == nil {
		t.Error("Ping on a dead connection succeeded")
	}
}

func TestCloseIdempotent(t *testing.T) {
	t.Parallel()
	srv := chattest.New(t, chattest.Options{Handler: chattest.Scripted("", turn)})
	c, err := chat.Dial(testCtx(t), chat.Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		c.Close()
	}()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case <-closed:
	case <-time.After(waitTimeout):
		t.Fatal("concurrent Close did not return")
	}
	if err := c.Close(); err != nil {
		t.Errorf("third Close: %v", err)
	}
	if _, ok := next(t, c); ok {
		t.Error("Events open after Close")
	}
	if !errors.Is(c.Err(), chat.ErrClosed) {
		t.Errorf("Err() = %v, want ErrClosed", c.Err())
	}
	if _, err := c.SendMessage(testCtx(t), "late"); !errors.Is(err, chat.ErrClosed) {
		t.Errorf("SendMessage after Close: %v, want ErrClosed", err)
	}
}

func TestSlowConsumerDropped(t *testing.T) {
	t.Parallel()
	chatty := func(string) []wire.Envelope {
		var out []wire.Envelope
		for range 20 {
			out = append(out, wire.MustNew(wire.TypeAssistantDelta, "", "", wire.Text{Text: "x"}))
		}
		return append(out, wire.MustNew(wire.TypeTurnDone, "", "", wire.TurnDone{Reason: wire.ReasonStop}))
	}
	srv := chattest.New(t, chattest.Options{Handler: chattest.Scripted("", chatty)})
	c := dial(t, chat.Config{URL: srv.URL, EventBuffer: 4, AfterSeq: 10})
	if _, err := c.SendMessage(testCtx(t), "go"); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(waitTimeout)
	for c.Err() == nil {
		select {
		case <-deadline:
			t.Fatal("connection not dropped")
		case <-time.After(10 * time.Millisecond):
		}
	}
	var seqs []uint64
	for {
		env, ok := next(t, c)
		if !ok {
			break
		}
		seqs = append(seqs, env.Seq)
	}
	if !errors.Is(c.Err(), chat.ErrSlowConsumer) {
		t.Errorf("Err() = %v, want ErrSlowConsumer", c.Err())
	}
	if len(seqs) != 4 || seqs[0] != 11 || seqs[3] != 14 || c.LastSeq() != 14 {
		t.Errorf("delivered seqs %v, LastSeq %d; want 11..14 and 14", seqs, c.LastSeq())
	}
}

func TestDeleteThread(t *testing.T) {
	t.Parallel()
	srv := chattest.New(t, chattest.Options{Token: "tok"})
	srv.Handle("DELETE /v1/threads/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "t_1" {
			chattest.WriteError(w, http.StatusNotFound, wire.CodeNotFound, "no thread "+r.PathValue("id"))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	cfg := chat.Config{URL: srv.URL, Token: "tok"}
	if err := chat.DeleteThread(testCtx(t), cfg, "t_1"); err != nil {
		t.Fatalf("delete t_1: %v", err)
	}
	err := chat.DeleteThread(testCtx(t), cfg, "t_2")
	var werr wire.Error
	var herr *chat.HTTPError
	if !errors.As(err, &werr) || werr.Code != wire.CodeNotFound || !errors.As(err, &herr) || herr.StatusCode != 404 {
		t.Errorf("delete t_2: err = %v, want 404 not_found", err)
	}
	cfg.Token = "bad"
	if err := chat.DeleteThread(testCtx(t), cfg, "t_1"); !errors.Is(err, chat.ErrUnauthorized) {
		t.Errorf("bad token: err = %v, want ErrUnauthorized", err)
	}
}

// An error answering another request sent during a turn — an approval
// answer naming a request the bridge already decided gets not_found —
// reaches fn, and the turn goes on.
func TestAwaitPassesErrorsOfOtherRequests(t *testing.T) {
	t.Parallel()
	script := func(string) []wire.Envelope {
		return []wire.Envelope{
			wire.MustNew(chattest.WaitApproval, "", "", wire.ApprovalRequest{
				ApprovalID:     "ap_1",
				ApprovalAction: wire.ApprovalAction{Kind: wire.ApprovalTool, Tool: "execute", CallID: "c1", Arguments: []byte(`{}`)},
				Expires:        time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			}),
			wire.MustNew(wire.TypeTurnDone, "", "", wire.TurnDone{Reason: wire.ReasonStop}),
		}
	}
	srv := chattest.New(t, chattest.Options{Handler: chattest.Scripted("", script)})
	c := dial(t, chat.Config{URL: srv.URL})
	ctx := testCtx(t)
	answer := func(id, approval string) {
		if err := c.Send(ctx, wire.MustNew(wire.TypeApprove, "", id, wire.ApprovalAnswer{ApprovalID: approval})); err != nil {
			t.Error(err)
		}
	}
	var errs []wire.Error
	done, err := c.Run(ctx, "hi", func(env wire.Envelope) {
		switch env.Type {
		case wire.TypeApprovalRequest:
			answer("a1", "ap_gone") // decided already, say
		case wire.TypeError:
			var werr wire.Error
			if env.ID != "a1" || env.Decode(&werr) != nil {
				t.Errorf("error %q %s", env.ID, env.Data)
			}
			errs = append(errs, werr)
			answer("a2", "ap_1")
		}
	})
	if err != nil || done.Reason != wire.ReasonStop {
		t.Fatalf("turn: %+v, %v; want it to go on to stop", done, err)
	}
	if len(errs) != 1 || errs[0].Code != wire.CodeNotFound {
		t.Fatalf("errors seen during the turn: %+v, want one not_found", errs)
	}
}
