package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// helloAnswer reads the bridge's hello and returns it.
func (s *session) helloAnswer() wire.Hello {
	s.t.Helper()
	env := s.read()
	var h wire.Hello
	if env.Type != wire.TypeHello || env.Decode(&h) != nil {
		s.t.Fatalf("want hello, got %s %s", env.Type, env.Data)
	}
	return h
}

// A client whose after_seq is ahead of the thread's log (a log it never
// saw: another bridge's, or a thread that lost its tail) is told so, and is
// served from the log's end: it gets the answer to its own request and
// every later event, instead of nothing up to the seq it named.
func TestAfterSeqAheadOfLog(t *testing.T) {
	e := newEnv(t)
	a, id := e.attach("", 0)
	if got := len(a.turn("m1", "one")); got != 4 {
		t.Fatalf("first turn had %d events, want 4", got)
	}
	last := uint64(4)
	for _, ahead := range []uint64{1, 50} {
		after := last + ahead
		func() {
			c := e.open(id, after)
			if h := c.helloAnswer(); h.AfterSeq != last {
				t.Fatalf("hello answer after_seq %d, want the log's last seq %d", h.AfterSeq, last)
			}
			env := c.read()
			var werr wire.Error
			if env.Type != wire.TypeError || env.Decode(&werr) != nil || werr.Code != wire.CodeSeqAhead {
				t.Fatalf("want error %s after the hello, got %s %s", wire.CodeSeqAhead, env.Type, env.Data)
			}
			if env.ID != "h1" || env.Seq != 0 {
				t.Errorf("error id %q seq %d, want the hello's id h1 and no seq", env.ID, env.Seq)
			}
			for _, part := range []string{fmt.Sprintf("after_seq %d", after), fmt.Sprintf("last seq %d", last)} {
				if !strings.Contains(werr.Message, part) {
					t.Errorf("message %q does not say %q", werr.Message, part)
				}
			}
			// The connection stays, and the client's own turn reaches it.
			mid := fmt.Sprintf("m%d", after)
			events := c.turn(mid, "two")
			if events[0].Type != wire.TypeUserEcho || events[0].ID != mid || events[0].Seq <= last {
				t.Fatalf("own turn: %s", summary(events))
			}
			a.readTurn() // a watches every turn; keep it drained
			last = events[len(events)-1].Seq
		}()
	}
}

// A client that has seen exactly the whole log gets no error and no
// replay: the hello answer, then only what happens next.
func TestAfterSeqAtLogEnd(t *testing.T) {
	e := newEnv(t)
	a, id := e.attach("", 0)
	a.turn("m1", "one")

	c := e.open(id, 4)
	if h := c.helloAnswer(); h.AfterSeq != 4 {
		t.Fatalf("hello answer after_seq %d, want 4", h.AfterSeq)
	}
	c.request(wire.TypePing, "p1", nil)
	if got := c.read(); got.Type != wire.TypePong || got.ID != "p1" {
		t.Fatalf("got %s %s seq %d, want only the pong", got.Type, got.Data, got.Seq)
	}
}
