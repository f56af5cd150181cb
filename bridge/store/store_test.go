package store_test

import (
	"errors"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, path string, opt store.Options) *store.Store {
	t.Helper()
	s, err := store.Open(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ev(seq uint64, text string) wire.Envelope {
	e := wire.MustNew(wire.TypeAssistantDelta, "t1", "m1", wire.Text{Text: text})
	e.Seq = seq
	return e
}

// appendAll appends n events from seq first and waits for their commit.
func appendAll(t *testing.T, s *store.Store, thread string, first, n uint64) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := first; i < first+n; i++ {
		wg.Add(1)
		s.Append(thread, ev(i, "x"), func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestEventsSurviveReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "boxwire.db")
	s := open(t, path, store.Options{})
	rec := store.Thread{ID: "t1", Box: "t1", Scope: wire.ScopeThread, Created: time.Now().UTC().Truncate(time.Second),
		Egress: []string{"api.example.com", "127.0.0.1:8080"}}
	if err := s.PutThread(rec); err != nil {
		t.Fatal(err)
	}
	appendAll(t, s, "t1", 1, 500)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, store.Options{})
	got, ok, err := s.Thread("t1")
	if err != nil || !ok || !reflect.DeepEqual(got, rec) {
		t.Fatalf("Thread = %+v, %v, %v; want %+v", got, ok, err, rec)
	}
	last, err := s.LastSeq("t1")
	if err != nil || last != 500 {
		t.Fatalf("LastSeq = %d, %v; want 500", last, err)
	}
	tests := []struct {
		after      uint64
		limit      int
		first, len uint64
	}{
		{0, 0, 1, 500},
		{10, 5, 11, 5},
		{499, 0, 500, 1},
		{500, 0, 0, 0},
	}
	for _, tc := range tests {
		evs, err := s.Events("t1", tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(evs)) != tc.len || (tc.len > 0 && evs[0].Seq != tc.first) {
			t.Errorf("Events(after %d, limit %d): %d events from %v; want %d from %d", tc.after, tc.limit, len(evs), evs, tc.len, tc.first)
		}
	}
	if err := s.DeleteThread("t1"); err != nil {
		t.Fatal(err)
	}
	if evs, _ := s.Events("t1", 0, 0); len(evs) != 0 {
		t.Fatalf("events after delete: %d", len(evs))
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "boxwire.db")
	open(t, path, store.Options{})
	if _, err := store.Open(path, store.Options{}); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
}

func TestPrune(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		ret        store.Retention
		live       bool
		wantFirst  uint64 // first kept seq of t1, 0 = thread gone
		wantThread bool
	}{
		{"count", store.Retention{MaxEvents: 10}, false, 91, true},
		{"bytes", store.Retention{MaxBytes: 1}, false, 100, true},
		{"age", store.Retention{MaxAge: time.Minute}, false, 0, false},
		{"age but live", store.Retention{MaxAge: time.Minute}, true, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, filepath.Join(t.TempDir(), "boxwire.db"), store.Options{Retention: tc.ret})
			if err := s.PutThread(store.Thread{ID: "t1"}); err != nil {
				t.Fatal(err)
			}
			appendAll(t, s, "t1", 1, 100)
			_, _, err := s.Prune(time.Now().Add(time.Hour), func(string) bool { return tc.live })
			if err != nil {
				t.Fatal(err)
			}
			evs, _ := s.Events("t1", 0, 1)
			_, ok, _ := s.Thread("t1")
			first := uint64(0)
			if len(evs) > 0 {
				first = evs[0].Seq
			}
			if first != tc.wantFirst || ok != tc.wantThread {
				t.Fatalf("first kept %d, thread %v; want %d, %v", first, ok, tc.wantFirst, tc.wantThread)
			}
		})
	}
}

func TestAppendAfterCloseFails(t *testing.T) {
	t.Parallel()
	s, err := store.Open(filepath.Join(t.TempDir(), "boxwire.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	done := make(chan error, 1)
	s.Append("t1", ev(1, "x"), func(err error) { done <- err })
	if err := <-done; err == nil {
		t.Fatal("append after close succeeded")
	}
}

// With a sync interval, commits do not wait for the disk; what was
// committed is still there after a close and reopen, and the syncer stops
// with the store (goleak checks it).
func TestSyncIntervalKeepsCommittedEvents(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "boxwire.db")
	s := open(t, path, store.Options{SyncInterval: 5 * time.Millisecond})
	appendAll(t, s, "t1", 1, 200)
	time.Sleep(20 * time.Millisecond) // let the syncer run at least once
	appendAll(t, s, "t1", 201, 100)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, store.Options{})
	if last, err := s.LastSeq("t1"); err != nil || last != 300 {
		t.Fatalf("LastSeq = %d, %v; want 300", last, err)
	}
}
