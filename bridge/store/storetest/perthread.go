package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

func testPrune(t *testing.T, cfg Config) {
	for _, tc := range []struct {
		name       string
		ret        store.Retention
		live       bool
		wantFirst  uint64 // first kept seq of t1, 0 = thread gone
		wantThread bool
		wantStats  store.PruneStats
	}{
		{"count", store.Retention{MaxEvents: 10}, false, 91, true, store.PruneStats{Events: 90}},
		{"bytes", store.Retention{MaxBytes: 1}, false, 100, true, store.PruneStats{Events: 99}},
		{"age", store.Retention{MaxAge: time.Minute}, false, 0, false, store.PruneStats{Threads: 1}},
		{"age but live", store.Retention{MaxAge: time.Minute}, true, 1, true, store.PruneStats{}},
		{"none", store.Retention{}, false, 1, true, store.PruneStats{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, cfg.New(t), store.Options{Retention: tc.ret})
			if err := s.PutThread(store.Thread{ID: "t1"}); err != nil {
				t.Fatal(err)
			}
			appendAll(t, s, "t1", 1, 100)
			st, gone, err := s.Prune(time.Now().Add(time.Hour), func(string) bool { return tc.live })
			if err != nil {
				t.Fatal(err)
			}
			evs, _ := s.Events("t1", 0, 1)
			_, ok, _ := s.Thread("t1")
			first := uint64(0)
			if len(evs) > 0 {
				first = evs[0].Seq
			}
			if first != tc.wantFirst || ok != tc.wantThread || st != tc.wantStats || len(gone) != tc.wantStats.Threads {
				t.Fatalf("first kept %d, thread %v, %+v, gone %v; want %d, %v, %+v", first, ok, st, gone, tc.wantFirst, tc.wantThread, tc.wantStats)
			}
			if last, err := s.LastSeq("t1"); err != nil || (tc.wantThread && last != 100) {
				t.Fatalf("LastSeq after prune = %d, %v", last, err)
			}
			// Nothing is older than MaxAge now: a second prune keeps all.
			if st, _, err := s.Prune(time.Now(), nil); err != nil || st.Threads != 0 {
				t.Fatalf("second Prune = %+v, %v", st, err)
			}
		})
	}
}

// A thread's agent cursor is committed behind the events appended before
// it, survives a reopen, and goes with the thread.
func testAgentCursor(t *testing.T, cfg Config) {
	o := cfg.New(t)
	s := open(t, o, store.Options{})
	if _, ok, err := s.Cursor("t1"); ok || err != nil {
		t.Fatalf("cursor of a new thread: ok %v, err %v", ok, err)
	}
	want := store.Cursor{Instance: "a3f0", Seq: 7, Held: json.RawMessage(`[{"call_id":"c1","text":"tok"}]`)}
	for seq := uint64(1); seq <= 3; seq++ {
		s.Append("t1", ev(seq, "x"), nil)
		s.SaveCursor("t1", store.Cursor{Instance: "a3f0", Seq: seq + 4})
	}
	s.SaveCursor("t1", want)
	s.Flush()
	if got, ok, err := s.Cursor("t1"); !ok || err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Cursor = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, o, store.Options{})
	if got, ok, err := s.Cursor("t1"); !ok || err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopen Cursor = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	if last, err := s.LastSeq("t1"); err != nil || last != 3 {
		t.Fatalf("LastSeq = %d, %v", last, err)
	}
	if err := s.DeleteThread("t1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Cursor("t1"); ok || err != nil {
		t.Fatalf("cursor after delete: ok %v, err %v", ok, err)
	}
	s.Close()
	s.SaveCursor("t1", want) // after Close: nothing, no panic
}

// An agent's events and the cursor that covers them, queued as one
// group, are all there once done is called, and survive a reopen; a
// group with no events stores just the cursor.
func testAppendGroup(t *testing.T, cfg Config) {
	o := cfg.New(t)
	s := open(t, o, store.Options{})
	if err := s.PutThread(store.Thread{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	want := store.Cursor{Instance: "a3f0", Seq: 12, Held: json.RawMessage(`[{"call_id":"c1","text":"tok"}]`)}
	s.AppendGroup("t1", []wire.Envelope{ev(1, "tail"), ev(2, "result")}, &want, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// done came from the writer after the commit: no Flush needed.
	if got, ok, err := s.Cursor("t1"); !ok || err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Cursor = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	if last, err := s.LastSeq("t1"); err != nil || last != 2 {
		t.Fatalf("LastSeq = %d, %v; want 2", last, err)
	}
	alone := store.Cursor{Instance: "a3f0", Seq: 13}
	s.AppendGroup("t1", nil, &alone, nil) // a chunk kept back whole
	s.Flush()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, o, store.Options{})
	if got, ok, err := s.Cursor("t1"); !ok || err != nil || !reflect.DeepEqual(got, alone) {
		t.Fatalf("after reopen Cursor = %+v, %v, %v; want %+v", got, ok, err, alone)
	}
	if evs, err := s.Events("t1", 0, 0); err != nil || len(evs) != 2 {
		t.Fatalf("after reopen Events = %d, %v; want 2", len(evs), err)
	}
	s.Close()
	s.AppendGroup("t1", []wire.Envelope{ev(3, "late")}, &alone, func(err error) { done <- err })
	if err := <-done; err == nil {
		t.Error("a group after Close was accepted")
	}
}

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
func testInflight(t *testing.T, cfg Config) {
	o := cfg.New(t)
	s := open(t, o, store.Options{})
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
	s = open(t, o, store.Options{})
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

// Writes queued for a thread after it was deleted — the last events, the
// cursor or the request list of a thread whose goroutines are still
// winding down — are dropped: nothing of the thread comes back.
func testWritesAfterDeleteDropped(t *testing.T, cfg Config) {
	for _, tc := range []struct {
		name   string
		delete func(store.Backend) error
	}{
		{"DeleteThread", func(s store.Backend) error { return s.DeleteThread("t1") }},
		{"retention", func(s store.Backend) error {
			_, gone, err := s.Prune(time.Now().Add(time.Hour), nil)
			if err == nil && len(gone) != 1 {
				err = errors.New("prune deleted no thread")
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, cfg.New(t), store.Options{Retention: store.Retention{MaxAge: time.Minute}})
			if err := s.PutThread(store.Thread{ID: "t1"}); err != nil {
				t.Fatal(err)
			}
			appendAll(t, s, "t1", 1, 3)
			if err := tc.delete(s); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 2)
			s.Append("t1", ev(4, "late"), func(err error) { done <- err })
			if err := receive(t, "late append", done); !errors.Is(err, store.ErrDeleted) {
				t.Fatalf("late append: %v, want ErrDeleted", err)
			}
			s.AppendNext("t1", ev(0, "late"), func(_ uint64, err error) { done <- err })
			if err := receive(t, "late AppendNext", done); !errors.Is(err, store.ErrDeleted) {
				t.Fatalf("late AppendNext: %v, want ErrDeleted", err)
			}
			s.SaveCursor("t1", store.Cursor{Instance: "a", Seq: 9})
			s.SaveInflight("t1", []wire.Envelope{req("c1/m1", "late")})
			appendAll(t, s, "t2", 1, 1) // another thread is unaffected
			s.Flush()

			if evs, err := s.Events("t1", 0, 0); err != nil || len(evs) != 0 {
				t.Errorf("events after delete: %d, %v", len(evs), err)
			}
			if _, ok, err := s.Cursor("t1"); ok || err != nil {
				t.Errorf("cursor after delete: %v, %v", ok, err)
			}
			if reqs, err := s.Inflight("t1"); len(reqs) != 0 || err != nil {
				t.Errorf("requests in flight after delete: %q, %v", ids(reqs), err)
			}
			if evs, err := s.Events("t2", 0, 0); err != nil || len(evs) != 1 {
				t.Errorf("t2 events: %d, %v", len(evs), err)
			}
		})
	}
}

// On a shared store a thread whose lease has not expired is live
// wherever the lease was taken: Prune on one store does not delete for
// age a thread another store (another bridge) holds the lease of, though
// the caller's live does not know it; once the lease is released the
// thread goes.
func testPruneKeepsLeased(t *testing.T, cfg Config) {
	if !cfg.Shared {
		t.Skip("one bridge has the store: its live knows every relayed thread")
	}
	ctx := context.Background()
	o := cfg.New(t)
	opt := store.Options{Retention: store.Retention{MaxAge: time.Minute}}
	a, b := open(t, o, opt), open(t, o, opt)
	for _, id := range []string{"t_peer", "t_idle"} {
		if err := a.PutThread(store.Thread{ID: id}); err != nil {
			t.Fatal(err)
		}
		appendAll(t, a, id, 1, 3)
	}
	if _, err := b.AcquireLease(ctx, "t_peer", "bridge-b", time.Minute); err != nil {
		t.Fatal(err)
	}
	_, gone, err := a.Prune(time.Now().Add(time.Hour), func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(gone) != "[t_idle]" {
		t.Fatalf("Prune deleted %v, want [t_idle] (t_peer is leased)", gone)
	}
	if _, ok, _ := a.Thread("t_peer"); !ok {
		t.Fatal("the leased thread's record is gone")
	}
	if last, err := a.LastSeq("t_peer"); err != nil || last != 3 {
		t.Fatalf("leased thread's LastSeq = %d, %v; want 3", last, err)
	}
	if err := b.ReleaseLease(ctx, "t_peer", "bridge-b"); err != nil {
		t.Fatal(err)
	}
	if _, gone, err = a.Prune(time.Now().Add(time.Hour), nil); err != nil || fmt.Sprint(gone) != "[t_peer]" {
		t.Fatalf("Prune after the release deleted %v, %v; want [t_peer]", gone, err)
	}
}
