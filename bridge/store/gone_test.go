package store_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Writes queued for a thread after it was deleted — the last events, the
// cursor or the request list of a thread whose goroutines are still
// winding down — are dropped: nothing of the thread comes back.
func TestWritesAfterDeleteDropped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		delete func(*store.Store) error
	}{
		{"DeleteThread", func(s *store.Store) error { return s.DeleteThread("t1") }},
		{"retention", func(s *store.Store) error {
			_, gone, err := s.Prune(time.Now().Add(time.Hour), nil)
			if err == nil && len(gone) != 1 {
				err = errors.New("prune deleted no thread")
			}
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, filepath.Join(t.TempDir(), "boxwire.db"), store.Options{Retention: store.Retention{MaxAge: time.Minute}})
			if err := s.PutThread(store.Thread{ID: "t1"}); err != nil {
				t.Fatal(err)
			}
			appendAll(t, s, "t1", 1, 3)
			if err := tc.delete(s); err != nil {
				t.Fatal(err)
			}

			done := make(chan error, 1)
			s.Append("t1", ev(4, "late"), func(err error) { done <- err })
			if err := <-done; !errors.Is(err, store.ErrDeleted) {
				t.Fatalf("late append: %v, want ErrDeleted", err)
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
