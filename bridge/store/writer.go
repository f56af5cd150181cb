package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/boxwire/boxwire/bridge/wire"
)

// item is one queued append, cursor (cursor.go) or flush marker.
type item struct {
	thread string
	env    wire.Envelope
	done   func(error) // nil for flush markers and callers that do not care
	flush  chan struct{}
	cursor *Cursor // set for SaveCursor
	// inflight is set for SaveInflight (inflight.go): the thread's list.
	inflight *[]wire.Envelope
	// next is set for AppendNext (next.go): the store numbers env.
	next func(seq uint64, err error)
}

// writer is the store's group-commit goroutine: it takes everything queued,
// writes it in one transaction, then calls the callbacks in queue order.
type writer struct {
	s       *Store
	mu      sync.Mutex
	cond    *sync.Cond // signalled when the queue changes
	queue   []item
	closed  bool
	dirty   bool          // committed since the last fsync (SyncInterval mode)
	stopped chan struct{} // closed when the goroutines return
	synced  chan struct{} // closed when the syncer returns
	quit    chan struct{} // closed by stop: the syncer quits
	gone    goneSet       // threads deleted: their writes are dropped (gone.go)
}

func (w *writer) start(s *Store) {
	w.s = s
	w.cond = sync.NewCond(&w.mu)
	w.stopped = make(chan struct{})
	w.synced = make(chan struct{})
	w.quit = make(chan struct{})
	go w.run()
	if s.opt.SyncInterval > 0 {
		go w.syncer(s.opt.SyncInterval)
	} else {
		close(w.synced)
	}
}

// syncer fsyncs the file every interval when something was committed since
// the last time (SyncInterval mode), until stop.
func (w *writer) syncer(interval time.Duration) {
	defer close(w.synced)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-tick.C:
		}
		w.mu.Lock()
		dirty := w.dirty
		w.dirty = false
		w.mu.Unlock()
		if dirty {
			if err := w.s.db.Sync(); err != nil {
				w.s.log.Error("sync the store", "err", err)
			}
		}
	}
}

// Append queues env (which must carry its seq) for the thread and returns
// at once, unless the queue is full: then it blocks until the writer has
// room. done, when not nil, is called from the writer goroutine after the
// transaction holding env committed (err nil) or failed; callbacks run in
// the order of the Append calls. After Close, done gets an error at once;
// for a thread deleted before the call, ErrDeleted.
func (s *Store) Append(thread string, env wire.Envelope, done func(error)) {
	if err := s.enqueue(item{thread: thread, env: env, done: done}); err != nil && done != nil {
		done(fmt.Errorf("append to %s: %w", thread, err))
	}
}

// errClosed is enqueue's refusal after Close.
var errClosed = errors.New("store closed")

// enqueue queues it behind everything queued before it. It returns at
// once unless the queue is full, then blocks until the writer has room.
// After Close it refuses it with errClosed, for a deleted thread with
// ErrDeleted (gone.go).
func (s *Store) enqueue(it item) error {
	w := &s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.closed && len(w.queue) >= s.opt.QueueEvents {
		w.cond.Wait()
	}
	switch {
	case w.closed:
		return errClosed
	case w.gone.hasLocked(it.thread):
		return ErrDeleted
	}
	w.queue = append(w.queue, it)
	w.cond.Broadcast()
	return nil
}

// flush blocks until everything queued before it is written.
func (w *writer) flush() {
	ch := make(chan struct{})
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.queue = append(w.queue, item{flush: ch})
	w.cond.Broadcast()
	w.mu.Unlock()
	<-ch
}

// stop lets the writer write what is queued, then waits for it to return.
func (w *writer) stop() {
	w.mu.Lock()
	w.closed = true
	w.cond.Broadcast()
	w.mu.Unlock()
	<-w.stopped
	close(w.quit)
	<-w.synced
}

func (w *writer) run() {
	defer close(w.stopped)
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.closed {
			w.cond.Wait()
		}
		batch := w.queue
		w.queue = nil
		closed := w.closed
		w.cond.Broadcast() // room for blocked Appends
		w.mu.Unlock()
		if len(batch) > 0 {
			err := w.commit(batch)
			if err != nil {
				w.s.log.Error("store events", "events", len(batch), "err", err)
			}
			w.mu.Lock()
			w.dirty = true
			w.mu.Unlock()
			for _, it := range batch {
				if it.flush != nil {
					close(it.flush)
				} else if it.next != nil {
					it.next(committedSeq(it, err), err) // next.go
				} else if it.done != nil {
					it.done(err)
				}
			}
		}
		if closed {
			w.mu.Lock()
			rest := len(w.queue)
			w.mu.Unlock()
			if rest == 0 {
				return
			}
		}
	}
}

// commit writes batch in one transaction.
func (w *writer) commit(batch []item) error {
	now := time.Now()
	return w.s.db.Update(func(tx *bolt.Tx) error {
		events := tx.Bucket(bucketEvents)
		cursors := map[string]*Cursor{}
		inflight := map[string][]wire.Envelope{}
		for i, it := range batch {
			if it.flush != nil {
				continue
			}
			if it.cursor != nil {
				cursors[it.thread] = it.cursor // the newest wins
				continue
			}
			if it.inflight != nil {
				inflight[it.thread] = *it.inflight // the newest wins (inflight.go)
				continue
			}
			b, err := events.CreateBucketIfNotExists([]byte(it.thread))
			if err != nil {
				return fmt.Errorf("events bucket of %s: %w", it.thread, err)
			}
			if it.next != nil {
				it.env.Seq = nextSeq(b) // next.go
				batch[i].env.Seq = it.env.Seq
			}
			data, err := json.Marshal(it.env)
			if err != nil {
				return fmt.Errorf("encode event %d of %s: %w", it.env.Seq, it.thread, err)
			}
			if err := b.Put(seqKey(it.env.Seq), data); err != nil {
				return err
			}
			if err := touch(tx, it.thread, now); err != nil {
				return err
			}
		}
		if err := putInflight(tx, inflight); err != nil {
			return err
		}
		return putCursors(tx, cursors)
	})
}
