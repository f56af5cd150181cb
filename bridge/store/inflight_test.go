package store_test

import (
	"path/filepath"
	"testing"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

func req(id, text string) wire.Envelope {
	return wire.MustNew(wire.TypeUserMessage, "t1", id, wire.UserMessage{Text: text})
}

func ids(reqs []wire.Envelope) string {
	out := ""
	for _, r := range reqs {
		out += r.ID + ";"
	}
	return out
}

// A thread's list of requests in flight: the newest queued list wins, an
// empty one removes it, it survives a reopen and goes with the thread.
func TestInflight(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "boxwire.db")
	s := open(t, path, store.Options{})
	for _, tc := range []struct {
		name string
		save [][]wire.Envelope
		want string
	}{
		{"none", nil, ""},
		{"one", [][]wire.Envelope{{req("c1/m1", "a")}}, "c1/m1;"},
		{"newest wins", [][]wire.Envelope{{req("c1/m1", "a")}, {req("c1/m1", "a"), req("c1/m2", "b")}}, "c1/m1;c1/m2;"},
		{"acked", [][]wire.Envelope{{req("c1/m2", "b")}}, "c1/m2;"},
		{"empty deletes", [][]wire.Envelope{{}}, ""},
	} {
		for i, list := range tc.save {
			s.Append("t1", ev(uint64(i+1), "x"), nil)
			s.SaveInflight("t1", list)
		}
		s.Flush()
		got, err := s.Inflight("t1")
		if err != nil || ids(got) != tc.want {
			t.Fatalf("%s: Inflight = %q, %v; want %q", tc.name, ids(got), err, tc.want)
		}
	}
	s.SaveInflight("t1", []wire.Envelope{req("c1/m3", "c")})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, store.Options{})
	got, err := s.Inflight("t1")
	if err != nil || ids(got) != "c1/m3;" {
		t.Fatalf("after reopen Inflight = %q, %v", ids(got), err)
	}
	var m wire.UserMessage
	if err := got[0].Decode(&m); err != nil || m.Text != "c" || got[0].Type != wire.TypeUserMessage {
		t.Fatalf("request %+v: %v", got[0], err)
	}
	if err := s.DeleteThread("t1"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Inflight("t1"); err != nil || len(got) != 0 {
		t.Fatalf("after delete Inflight = %q, %v", ids(got), err)
	}
	s.Close()
	s.SaveInflight("t1", nil) // after Close: nothing, no panic
}
