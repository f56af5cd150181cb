package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// An agent's event and the cursor that covers it are committed in one
// transaction however the writer's batches fall: a bridge killed between
// two commits must not restart with events its cursor does not cover (the
// agent's replay would log them twice; TestFaultBridgeKilledMidStream saw
// 401 lines of 400). Another goroutine appends to another thread all the
// while, so the writer takes batches at every moment.
func TestAppendGroupCommitsTheCursorWithItsEvents(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bad []string
	commit := func(batch []store.Item) (map[string]error, error) {
		// Within one batch, every event of t1 must be followed by the
		// cursor that covers it.
		var pending []uint64
		for _, it := range batch {
			switch {
			case it.Thread != "t1":
			case it.Cursor != nil:
				for _, seq := range pending {
					if seq > it.Cursor.Seq {
						mu.Lock()
						bad = append(bad, "cursor behind an event of its batch")
						mu.Unlock()
					}
				}
				pending = nil
			case it.IsEvent():
				pending = append(pending, it.Env.Seq)
			}
		}
		if len(pending) > 0 {
			mu.Lock()
			bad = append(bad, "events committed without their cursor")
			mu.Unlock()
		}
		time.Sleep(20 * time.Microsecond) // a transaction takes time
		return nil, nil
	}
	w := store.NewWriter(store.WriterConfig{Commit: commit})
	defer w.Stop()

	stop := make(chan struct{})
	other := make(chan struct{})
	go func() {
		defer close(other)
		for seq := uint64(1); ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			w.Append("t2", wire.Envelope{Type: wire.TypeToolOutput, Seq: seq}, nil)
		}
	}()
	const n = 5000
	var seq uint64
	for i := range n {
		evs := []wire.Envelope{{Type: wire.TypeToolOutput, Seq: seq + 1}}
		if i%3 == 0 { // a flushed tail before a result
			evs = append(evs, wire.Envelope{Type: wire.TypeToolResult, Seq: seq + 2})
		}
		seq += uint64(len(evs))
		w.AppendGroup("t1", evs, &store.Cursor{Instance: "a", Seq: seq}, nil)
	}
	close(stop)
	<-other
	w.Flush()
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("%d of %d groups split (%s first)", len(bad), n, bad[0])
	}
}

// A group's done is called once, after everything in it committed; an
// empty group calls it at once; after Stop it gets an error.
func TestAppendGroupDone(t *testing.T) {
	t.Parallel()
	var committed []store.Item
	var mu sync.Mutex
	w := store.NewWriter(store.WriterConfig{Commit: func(batch []store.Item) (map[string]error, error) {
		mu.Lock()
		committed = append(committed, batch...)
		mu.Unlock()
		return nil, nil
	}})
	calls := 0
	done := make(chan error, 4)
	w.AppendGroup("t1", []wire.Envelope{{Seq: 1}, {Seq: 2}}, &store.Cursor{Seq: 7}, func(err error) {
		calls++
		done <- err
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(committed) != 3 || committed[2].Cursor == nil || committed[2].Cursor.Seq != 7 {
		t.Errorf("committed %+v, want two events then the cursor", committed)
	}
	mu.Unlock()
	w.AppendGroup("t1", nil, nil, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Errorf("empty group: %v", err)
	}
	w.Stop()
	w.AppendGroup("t1", []wire.Envelope{{Seq: 3}}, nil, func(err error) { done <- err })
	if err := <-done; err == nil {
		t.Error("a group after Stop was accepted")
	}
	if calls != 1 {
		t.Errorf("done called %d times, want once", calls)
	}
}
