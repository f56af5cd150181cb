package store

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Item is one write queued on a Writer: an event (Append, or AppendNext
// when Next is set), a thread's agent cursor, or its list of requests in
// flight. A Commit func reads it; for an AppendNext item it sets Env.Seq
// to the seq it chose.
type Item struct {
	Thread string
	Env    wire.Envelope
	// Cursor is set for SaveCursor, Inflight for SaveInflight (never nil
	// then, possibly empty: the thread has none).
	Cursor   *Cursor
	Inflight *[]wire.Envelope
	// Next is set for AppendNext: the store numbers Env.
	Next func(seq uint64, err error)

	done   func(error)   // Append's callback, may be nil
	flush  chan struct{} // set for Flush's marker, which Commit never sees
	queued time.Time     // when an event was queued (AppendLatency)
}

// IsEvent reports whether it is an event (not a cursor or a list).
func (it Item) IsEvent() bool { return it.Cursor == nil && it.Inflight == nil }

// Commit writes batch (never empty) in one transaction. It returns the
// threads whose writes it dropped, each with why: one wrapping ErrDeleted
// (a store shared by several bridges learns of another's deletions
// there; the Writer then refuses the thread's later writes) or
// ErrLeaseLost (another bridge took the thread's lease: only this batch's
// writes are refused) — and an error when nothing was written.
type Commit func(batch []Item) (dropped map[string]error, err error)

// WriterConfig configures a Writer.
type WriterConfig struct {
	// Commit writes one batch; required.
	Commit Commit
	// Queue bounds the items waiting; default DefaultQueueEvents.
	Queue int
	// Logger receives commit errors; nil discards them.
	Logger *slog.Logger
	// Retry, when above zero, commits a failed batch again after this
	// long (doubling up to a few seconds) until it commits or Stop: for a
	// store whose failures pass (a database that restarts). The queue
	// waits meanwhile, and fills: then calls block. Zero: a failed batch's
	// callbacks get the error at once.
	Retry time.Duration
}

// maxRetry bounds the wait between two commits of a failed batch.
const maxRetry = 5 * time.Second

// Writer is a store's group commit, shared by the bbolt and the
// PostgreSQL store: calls queue items and return at once (blocking only
// while the queue is full); one goroutine takes everything queued,
// commits it with one Commit call, then calls the callbacks in queue
// order. It also remembers the threads deleted lately (MarkGone) and
// refuses their writes with ErrDeleted before they are queued. A Writer is
// safe for concurrent use; Stop ends its goroutine.
type Writer struct {
	cfg     WriterConfig
	log     *slog.Logger
	mu      sync.Mutex
	cond    *sync.Cond // signalled when the queue changes
	queue   []Item
	closed  bool
	stopped chan struct{} // closed when run returns
	quit    chan struct{} // closed by Stop: a retrying commit gives up
	gone    goneSet       // threads deleted: their writes are dropped (gone.go)
	lat     latency       // from enqueue to commit, per event (latency.go)
}

// NewWriter starts a writer's goroutine; Stop waits for it.
func NewWriter(cfg WriterConfig) *Writer {
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueueEvents
	}
	w := &Writer{cfg: cfg, log: cfg.Logger, stopped: make(chan struct{}), quit: make(chan struct{})}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	w.cond = sync.NewCond(&w.mu)
	go w.run()
	return w
}

// errClosed is the refusal of writes after Close.
var errClosed = errors.New("store closed")

// Append is Backend.Append.
func (w *Writer) Append(thread string, env wire.Envelope, done func(error)) {
	if err := w.enqueue(Item{Thread: thread, Env: env, done: done}); err != nil && done != nil {
		done(fmt.Errorf("append to %s: %w", thread, err))
	}
}

// AppendNext is Backend.AppendNext: Commit chooses the seq.
func (w *Writer) AppendNext(thread string, env wire.Envelope, done func(seq uint64, err error)) {
	if done == nil {
		done = func(uint64, error) {}
	}
	if err := w.enqueue(Item{Thread: thread, Env: env, Next: done}); err != nil {
		done(0, fmt.Errorf("append to %s: %w", thread, err))
	}
}

// AppendGroup is Backend.AppendGroup: the items are queued at once, so
// the batch that commits one commits them all. done goes with the last
// item.
func (w *Writer) AppendGroup(thread string, evs []wire.Envelope, c *Cursor, done func(error)) {
	items := make([]Item, 0, len(evs)+1)
	for _, env := range evs {
		items = append(items, Item{Thread: thread, Env: env})
	}
	if c != nil {
		cur := *c
		items = append(items, Item{Thread: thread, Cursor: &cur})
	}
	if len(items) == 0 {
		if done != nil {
			done(nil)
		}
		return
	}
	items[len(items)-1].done = done
	if err := w.enqueue(items...); err != nil && done != nil {
		done(fmt.Errorf("append to %s: %w", thread, err))
	}
}

// SaveCursor is Backend.SaveCursor.
func (w *Writer) SaveCursor(thread string, c Cursor) {
	_ = w.enqueue(Item{Thread: thread, Cursor: &c}) // dropped after Close or deletion
}

// SaveInflight is Backend.SaveInflight.
func (w *Writer) SaveInflight(thread string, reqs []wire.Envelope) {
	list := append([]wire.Envelope{}, reqs...)           // never nil: marks the item
	_ = w.enqueue(Item{Thread: thread, Inflight: &list}) // dropped after Close or deletion
}

// enqueue queues items, in order, behind everything queued before them,
// blocking while the queue is full; they are queued at once, so one batch
// takes them all. After Stop it refuses them with errClosed, for a
// deleted thread with ErrDeleted. Every item names the same thread.
func (w *Writer) enqueue(items ...Item) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.closed && len(w.queue) >= w.cfg.Queue {
		w.cond.Wait()
	}
	switch {
	case w.closed:
		return errClosed
	case w.gone.hasLocked(items[0].Thread):
		return ErrDeleted
	}
	now := time.Now()
	for _, it := range items {
		if it.IsEvent() {
			it.queued = now
		}
		w.queue = append(w.queue, it)
	}
	w.cond.Broadcast()
	return nil
}

// Flush blocks until everything queued before it is committed; after
// Stop it returns at once.
func (w *Writer) Flush() {
	ch := make(chan struct{})
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.queue = append(w.queue, Item{flush: ch})
	w.cond.Broadcast()
	w.mu.Unlock()
	<-ch
}

// MarkGone makes the writer refuse writes for ids from now on
// (ErrDeleted); a store calls it when it deletes threads.
func (w *Writer) MarkGone(ids ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		w.gone.addLocked(id)
	}
}

// Stop lets the writer commit what is queued, then waits for its
// goroutine (a batch being retried gets its error at once, and what is
// queued behind it is tried once). Later calls refuse their items.
func (w *Writer) Stop() {
	w.mu.Lock()
	if !w.closed {
		close(w.quit)
	}
	w.closed = true
	w.cond.Broadcast()
	w.mu.Unlock()
	<-w.stopped
}

func (w *Writer) run() {
	defer close(w.stopped)
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.closed {
			w.cond.Wait()
		}
		batch := w.queue
		w.queue = nil
		closed := w.closed
		w.cond.Broadcast() // room for blocked callers
		w.mu.Unlock()
		if len(batch) > 0 {
			w.commit(batch)
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

// commit hands batch, without its flush markers, to Commit, then calls
// every callback in queue order.
func (w *Writer) commit(batch []Item) {
	writes := make([]Item, 0, len(batch))
	for _, it := range batch {
		if it.flush == nil {
			writes = append(writes, it)
		}
	}
	var dropped map[string]error
	var err error
	if len(writes) > 0 {
		dropped, err = w.commitRetrying(writes)
	}
	for id, why := range dropped {
		if errors.Is(why, ErrDeleted) {
			w.MarkGone(id) // deleted by another bridge
		}
	}
	i := 0
	for _, it := range batch {
		if it.flush != nil {
			close(it.flush)
			continue
		}
		if it.IsEvent() && err == nil && dropped[it.Thread] == nil {
			w.lat.observe(time.Since(it.queued))
		}
		notify(writes[i], dropped[it.Thread], err)
		i++
	}
}

// commitRetrying commits writes, again after a pause while it fails and
// Retry is set, until it commits or Stop is called.
func (w *Writer) commitRetrying(writes []Item) (map[string]error, error) {
	wait := w.cfg.Retry
	for {
		dropped, err := w.cfg.Commit(writes)
		if err == nil {
			return dropped, nil
		}
		if wait <= 0 || w.stopping(wait) {
			w.log.Error("store events", "items", len(writes), "err", err)
			return nil, err
		}
		w.log.Warn("store events: commit failed, trying again", "items", len(writes), "in", wait, "err", err)
		wait = min(2*wait, maxRetry)
	}
}

// stopping waits d, or less when Stop is called, and reports whether it
// was.
func (w *Writer) stopping(d time.Duration) bool {
	select {
	case <-w.quit:
		return true
	case <-time.After(d):
		return false
	}
}

// notify calls it's callback with the outcome of its batch: err, else
// why its thread's writes were dropped.
func notify(it Item, dropped error, err error) {
	if dropped != nil && err == nil {
		err = fmt.Errorf("append to %s: %w", it.Thread, dropped)
	}
	switch {
	case it.Next != nil && err != nil:
		it.Next(0, err)
	case it.Next != nil:
		it.Next(it.Env.Seq, nil)
	case it.done != nil:
		it.done(err)
	}
}
