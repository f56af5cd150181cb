package chat_test

import (
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/chat/chattest"
)

// A bridge whose log ends before the client's AfterSeq answers seq_ahead
// and sends its events from the log's end: the client delivers them (they
// are not repeats of what it saw) and LastSeq follows them.
func TestSeqAheadDeliversFromLogEnd(t *testing.T) {
	t.Parallel()
	srv := chattest.New(t, chattest.Options{Handler: func(p *chattest.Peer) {
		defer p.Close()
		if _, err := p.Recv(); err != nil { // the client's hello
			return
		}
		_ = p.Send(wire.MustNew(wire.TypeHello, "t_abc", "", wire.Hello{
			Version: wire.Version, Role: wire.RoleBridge, Thread: "t_abc", AfterSeq: 2}))
		_ = p.Send(wire.ErrorEnvelope("t_abc", "", wire.CodeSeqAhead, "after_seq 9 is ahead of the log (last seq 2)"))
		p.SetSeq(2)
		_ = p.Event(wire.MustNew(wire.TypeAssistantMessage, "", "m1", wire.Text{Text: "three"}))
		_, _ = p.Recv()
	}})
	c := dial(t, chat.Config{URL: srv.URL, Thread: "t_abc", AfterSeq: 9})
	if env, _ := next(t, c); env.Type != wire.TypeError {
		t.Fatalf("first message %s %s, want the seq_ahead error", env.Type, env.Data)
	}
	env, _ := next(t, c)
	if env.Type != wire.TypeAssistantMessage || env.Seq != 3 {
		t.Fatalf("got %s seq %d, want assistant_message seq 3", env.Type, env.Seq)
	}
	if got := c.LastSeq(); got != 3 {
		t.Fatalf("LastSeq() = %d, want 3", got)
	}
}
