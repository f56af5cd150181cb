package storetest

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

func testEventsSurviveReopen(t *testing.T, cfg Config) {
	o := cfg.New(t)
	s := open(t, o, store.Options{})
	rec := store.Thread{ID: "t1", Box: "t1", Scope: wire.ScopeThread, Created: time.Now().UTC().Truncate(time.Second),
		Egress: []string{"api.example.com", "127.0.0.1:8080"}}
	if err := s.PutThread(rec); err != nil {
		t.Fatal(err)
	}
	appendAll(t, s, "t1", 1, 500)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, o, store.Options{})
	got, ok, err := s.Thread("t1")
	if err != nil || !ok || !reflect.DeepEqual(got, rec) {
		t.Fatalf("Thread = %+v, %v, %v; want %+v", got, ok, err, rec)
	}
	if last, err := s.LastSeq("t1"); err != nil || last != 500 {
		t.Fatalf("LastSeq = %d, %v; want 500", last, err)
	}
	for _, tc := range []struct {
		after      uint64
		limit      int
		first, len uint64
	}{
		{0, 0, 1, 500},
		{10, 5, 11, 5},
		{499, 0, 500, 1},
		{500, 0, 0, 0},
	} {
		evs, err := s.Events("t1", tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(evs)) != tc.len || (tc.len > 0 && evs[0].Seq != tc.first) {
			t.Errorf("Events(after %d, limit %d): %d events from %v; want %d from %d", tc.after, tc.limit, len(evs), evs, tc.len, tc.first)
		}
		for i, e := range evs {
			if want := tc.first + uint64(i); e.Seq != want || e.Type != wire.TypeAssistantDelta || textOf(t, e) != "x" {
				t.Fatalf("event %d = %+v; want seq %d", i, e, want)
			}
		}
	}
	if err := s.DeleteThread("t1"); err != nil {
		t.Fatal(err)
	}
	if evs, _ := s.Events("t1", 0, 0); len(evs) != 0 {
		t.Fatalf("events after delete: %d", len(evs))
	}
	if _, ok, err := s.Thread("t1"); ok || err != nil {
		t.Fatalf("thread after delete: %v, %v", ok, err)
	}
	if last, err := s.LastSeq("t1"); err != nil || last != 0 {
		t.Fatalf("LastSeq after delete = %d, %v", last, err)
	}
	if err := s.DeleteThread("never"); err != nil {
		t.Fatalf("delete of a missing thread: %v", err)
	}
}

// Thread records: replaced by id, listed oldest first, missing is ok false.
func testThreadRecords(t *testing.T, cfg Config) {
	s := open(t, cfg.New(t), store.Options{})
	if _, ok, err := s.Thread("nope"); ok || err != nil {
		t.Fatalf("missing thread: ok %v, err %v", ok, err)
	}
	if ts, err := s.Threads(); len(ts) != 0 || err != nil {
		t.Fatalf("Threads of an empty store = %v, %v", ts, err)
	}
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	suspended := base.Add(time.Hour)
	recs := []store.Thread{
		{ID: "b", Created: base.Add(2 * time.Second), Owner: "ann", Image: "img:1", Runtime: "runsc", IdleTTL: time.Minute},
		{ID: "a", Created: base.Add(3 * time.Second), Scope: wire.ScopeThread},
		{ID: "c", Created: base.Add(1 * time.Second), Assistant: "helper", Suspended: &suspended,
			SuspendedFor: wire.ExitReason("idle"), Policy: []byte(`{"default":"ask"}`), MCP: []byte(`{"servers":[{"name":"docs","command":["docs-mcp"]}]}`)},
	}
	for _, r := range recs {
		if err := s.PutThread(r); err != nil {
			t.Fatal(err)
		}
	}
	recs[0].Box = "box-b" // replace
	if err := s.PutThread(recs[0]); err != nil {
		t.Fatal(err)
	}
	ts, err := s.Threads()
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, tr := range ts {
		order = append(order, tr.ID)
	}
	if fmt.Sprint(order) != "[c b a]" {
		t.Fatalf("Threads order %v; want [c b a]", order)
	}
	for i, want := range []store.Thread{recs[2], recs[0], recs[1]} {
		if !ts[i].Created.Equal(want.Created) {
			t.Errorf("%s created %v; want %v", want.ID, ts[i].Created, want.Created)
		}
		ts[i].Created = want.Created
		if ts[i].Suspended != nil && ts[i].Suspended.Equal(*want.Suspended) {
			ts[i].Suspended = want.Suspended
		}
		if !reflect.DeepEqual(ts[i], want) {
			t.Errorf("Threads[%d] = %+v; want %+v", i, ts[i], want)
		}
	}
}

// Append at a seq already stored replaces the event there, as a key/value
// put does; the newest seq stays the largest.
func testAppendReplacesSameSeq(t *testing.T, cfg Config) {
	s := open(t, cfg.New(t), store.Options{})
	appendAll(t, s, "t1", 1, 3)
	done := make(chan error, 2)
	s.Append("t1", ev(2, "again"), func(err error) { done <- err })
	s.Append("t1", ev(2, "and again"), func(err error) { done <- err })
	for range 2 {
		if err := receive(t, "append", done); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := s.Events("t1", 1, 1)
	if err != nil || len(evs) != 1 || textOf(t, evs[0]) != "and again" {
		t.Fatalf("Events = %v, %v; want seq 2 replaced", evs, err)
	}
	if last, err := s.LastSeq("t1"); err != nil || last != 3 {
		t.Fatalf("LastSeq = %d, %v; want 3", last, err)
	}
}

// AppendNext numbers from 1, continues after events the caller numbered,
// and tells each callback the seq it stored.
func testAppendNextNumbers(t *testing.T, cfg Config) {
	s := open(t, cfg.New(t), store.Options{})
	type res struct {
		seq uint64
		err error
	}
	got := make(chan res, 10)
	next := func(thread, text string) {
		s.AppendNext(thread, ev(99, text), func(seq uint64, err error) { got <- res{seq, err} })
	}
	next("t1", "a")
	next("t2", "b")
	next("t1", "c")
	for i, want := range []uint64{1, 1, 2} {
		if r := receive(t, "AppendNext", got); r.err != nil || r.seq != want {
			t.Fatalf("AppendNext %d: seq %d, %v; want %d", i, r.seq, r.err, want)
		}
	}
	appendAll(t, s, "t1", 3, 5) // 3..7
	next("t1", "d")
	if r := receive(t, "AppendNext", got); r.err != nil || r.seq != 8 {
		t.Fatalf("AppendNext after Append: seq %d, %v; want 8", r.seq, r.err)
	}
	s.AppendNext("t1", ev(0, "e"), nil) // nil callback
	s.Flush()
	evs, err := s.Events("t1", 7, 0)
	if err != nil || len(evs) != 2 || evs[0].Seq != 8 || textOf(t, evs[0]) != "d" || evs[1].Seq != 9 || textOf(t, evs[1]) != "e" {
		t.Fatalf("Events after 7 = %+v, %v", evs, err)
	}
}

// Writers that race on one thread — several stores on one place when the
// backend allows it, else goroutines of one store — each get
// consecutive seqs: the log is 1..N with no gap and no seq twice, every
// callback's seq holds that writer's event, and each writer's events keep
// the order it appended them in.
func testRacingWriters(t *testing.T, cfg Config) {
	const writers, goroutines, each = 2, 4, 150
	o := cfg.New(t)
	stores := make([]store.Backend, writers)
	for i := range stores {
		if i == 0 || cfg.Shared {
			stores[i] = open(t, o, store.Options{})
		} else {
			stores[i] = stores[0]
		}
	}
	type res struct {
		name string
		seq  uint64
		err  error
	}
	results := make(chan res, writers*goroutines*each)
	var wg sync.WaitGroup
	for w, s := range stores {
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range each {
					name := fmt.Sprintf("w%d-g%d-%03d", w, g, n)
					s.AppendNext("t1", ev(0, name), func(seq uint64, err error) { results <- res{name, seq, err} })
					if n%50 == 0 {
						time.Sleep(time.Millisecond) // let the batches interleave
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, s := range stores {
		s.Flush()
	}
	total := writers * goroutines * each
	bySeq := map[uint64]string{}
	for range total {
		r := receive(t, "AppendNext result", results)
		if r.err != nil {
			t.Fatalf("%s: %v", r.name, r.err)
		}
		if other, dup := bySeq[r.seq]; dup {
			t.Fatalf("seq %d given to %s and %s", r.seq, other, r.name)
		}
		bySeq[r.seq] = r.name
	}
	evs, err := stores[0].Events("t1", 0, 0)
	if err != nil || len(evs) != total {
		t.Fatalf("stored %d events, %v; want %d", len(evs), err, total)
	}
	lastOf := map[string]string{} // writer-goroutine -> its newest name
	for i, e := range evs {
		name := textOf(t, e)
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: a gap or a duplicate", i, e.Seq)
		}
		if bySeq[e.Seq] != name {
			t.Fatalf("seq %d holds %s; its callback said %s", e.Seq, name, bySeq[e.Seq])
		}
		who := name[:len(name)-4]
		if prev := lastOf[who]; prev >= name {
			t.Fatalf("%s stored after %s: a writer's order was lost", name, prev)
		}
		lastOf[who] = name
	}
	if last, err := stores[writers-1].LastSeq("t1"); err != nil || last != uint64(total) {
		t.Fatalf("LastSeq = %d, %v; want %d", last, err, total)
	}
}

func testAppendAfterCloseFails(t *testing.T, cfg Config) {
	s, err := cfg.New(t)(store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	done := make(chan error, 1)
	s.Append("t1", ev(1, "x"), func(err error) { done <- err })
	if err := receive(t, "append after close", done); err == nil {
		t.Fatal("append after close succeeded")
	}
	s.AppendNext("t1", ev(1, "x"), func(_ uint64, err error) { done <- err })
	if err := receive(t, "AppendNext after close", done); err == nil {
		t.Fatal("AppendNext after close succeeded")
	}
	s.Flush() // after Close: returns
}

// With SyncInterval set (bbolt: fsync at most that often; PostgreSQL:
// synchronous_commit off) what was committed is still there after a close
// and reopen, and the store's goroutines stop with it (the packages'
// goleak checks).
func testSyncInterval(t *testing.T, cfg Config) {
	o := cfg.New(t)
	s := open(t, o, store.Options{SyncInterval: 5 * time.Millisecond})
	appendAll(t, s, "t1", 1, 200)
	time.Sleep(20 * time.Millisecond) // let a bbolt syncer run at least once
	appendAll(t, s, "t1", 201, 100)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, o, store.Options{})
	if last, err := s.LastSeq("t1"); err != nil || last != 300 {
		t.Fatalf("LastSeq = %d, %v; want 300", last, err)
	}
}

// Ping answers nil while the store is open and an error once it is closed.
func testPing(t *testing.T, cfg Config) {
	s, err := cfg.New(t)(store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping of an open store: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err == nil {
		t.Fatal("Ping of a closed store: nil")
	}
}

// Each committed event is counted in the store's append latency, in the
// buckets of store.AppendBuckets.
func testAppendLatency(t *testing.T, cfg Config) {
	s := open(t, cfg.New(t), store.Options{})
	timed, ok := s.(interface{ AppendLatency() store.Latency })
	if !ok {
		t.Fatalf("%T has no AppendLatency", s)
	}
	appendAll(t, s, "t1", 1, 5)
	s.SaveCursor("t1", store.Cursor{Instance: "a", Seq: 5}) // not an event
	s.Flush()
	l := timed.AppendLatency()
	var n uint64
	for _, c := range l.Counts {
		n += c
	}
	if l.Count != 5 || n != 5 || l.Sum <= 0 || len(l.Counts) != len(store.AppendBuckets)+1 || len(l.Bounds) != len(store.AppendBuckets) {
		t.Fatalf("AppendLatency = %+v; want 5 events in %d buckets", l, len(store.AppendBuckets)+1)
	}
}
