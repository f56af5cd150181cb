package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// item is one queued append, cursor, list of requests in flight or flush
// marker.
type item struct {
	thread   string
	env      wire.Envelope
	done     func(error)         // Append's callback (may be nil)
	next     func(uint64, error) // set for AppendNext: the store numbers env
	cursor   *store.Cursor       // set for SaveCursor
	inflight *[]wire.Envelope    // set for SaveInflight
	flush    chan struct{}       // set for flush markers
}

// writer is the store's group-commit goroutine, as in the bbolt store: it
// takes everything queued, writes it in one transaction, then calls the
// callbacks in queue order.
type writer struct {
	s       *Store
	mu      sync.Mutex
	cond    *sync.Cond // signalled when the queue changes
	queue   []item
	closed  bool
	stopped chan struct{} // closed when run returns
	gone    goneSet       // threads this process deleted
}

func (w *writer) start(s *Store) {
	w.s = s
	w.cond = sync.NewCond(&w.mu)
	w.stopped = make(chan struct{})
	go w.run()
}

// Append queues env, which carries its seq, for the thread's log and
// returns at once unless the queue is full (then it blocks until there is
// room). done, when not nil, is called from the writer goroutine once the
// transaction holding env committed (nil) or failed; callbacks run in the
// order of the calls. After Close done gets an error at once; for a thread
// deleted before the call, store.ErrDeleted.
func (s *Store) Append(thread string, env wire.Envelope, done func(error)) {
	if err := s.enqueue(item{thread: thread, env: env, done: done}); err != nil && done != nil {
		done(fmt.Errorf("append to %s: %w", thread, err))
	}
}

// AppendNext is Append with the seq chosen in the committing transaction
// while the thread's row is locked: one past the newest committed seq, so
// writers in any number of bridges get consecutive seqs. done, when not
// nil, gets that seq (0 with an error).
func (s *Store) AppendNext(thread string, env wire.Envelope, done func(seq uint64, err error)) {
	if done == nil {
		done = func(uint64, error) {}
	}
	if err := s.enqueue(item{thread: thread, env: env, next: done}); err != nil {
		done(0, fmt.Errorf("append to %s: %w", thread, err))
	}
}

// SaveCursor queues c as the thread's agent cursor behind the events
// queued before it. After Close, or for a deleted thread, it does nothing.
func (s *Store) SaveCursor(thread string, c store.Cursor) {
	_ = s.enqueue(item{thread: thread, cursor: &c})
}

// SaveInflight queues reqs as the thread's whole list of requests in
// flight (empty: none) behind the events queued before it.
func (s *Store) SaveInflight(thread string, reqs []wire.Envelope) {
	list := append([]wire.Envelope{}, reqs...) // never nil: marks the item
	_ = s.enqueue(item{thread: thread, inflight: &list})
}

// Flush blocks until everything queued before it is committed.
func (s *Store) Flush() { s.w.flush() }

// enqueue queues it behind everything queued before it, blocking while
// the queue is full.
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
	case w.gone.has(it.thread):
		return store.ErrDeleted
	}
	w.queue = append(w.queue, it)
	w.cond.Broadcast()
	return nil
}

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

// markGone makes the writer refuse writes for ids from now on.
func (w *writer) markGone(ids ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		w.gone.add(id)
	}
}

// stop lets the writer commit what is queued, then waits for it.
func (w *writer) stop() {
	w.mu.Lock()
	w.closed = true
	w.cond.Broadcast()
	w.mu.Unlock()
	<-w.stopped
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
		w.cond.Broadcast() // room for blocked callers
		w.mu.Unlock()
		if len(batch) > 0 {
			deleted, err := w.commit(batch)
			if err != nil {
				w.s.log.Error("store events", "items", len(batch), "err", err)
			}
			if len(deleted) > 0 {
				w.markGone(keys(deleted)...) // deleted by another bridge
			}
			for _, it := range batch {
				notify(it, deleted[it.thread], err)
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

// notify calls it's callback with the outcome of its batch.
func notify(it item, deleted bool, err error) {
	if it.flush != nil {
		close(it.flush)
		return
	}
	if deleted && err == nil {
		err = fmt.Errorf("append to %s: %w", it.thread, store.ErrDeleted)
	}
	switch {
	case it.next != nil && err != nil:
		it.next(0, err)
	case it.next != nil:
		it.next(it.env.Seq, nil)
	case it.done != nil:
		it.done(err)
	}
}

// commit writes batch in one transaction. It first locks the thread_logs
// row of every thread in the batch, in thread order (so two bridges'
// batches cannot deadlock), reading each thread's newest seq and whether
// it was deleted; then numbers the AppendNext events, and writes events,
// newest seqs, cursors and lists of requests in flight. It returns the
// threads it found deleted: their items were dropped.
func (w *writer) commit(batch []item) (map[string]bool, error) {
	threads := threadsOf(batch)
	if len(threads) == 0 {
		return nil, nil
	}
	ctx, cancel := w.s.ctx()
	defer cancel()
	tx, err := w.s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	last, deleted, err := lockThreads(ctx, tx, threads)
	if err != nil {
		return nil, err
	}
	b, err := writes(batch, last, deleted, time.Now())
	if err != nil {
		return nil, err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return deleted, nil
}

// lockSQL creates the rows of threads new to the log and locks them all,
// in thread order, in one statement.
const lockSQL = `INSERT INTO thread_logs (thread) SELECT t FROM unnest($1::text[]) AS t ORDER BY t COLLATE "C"
ON CONFLICT (thread) DO UPDATE SET thread = excluded.thread
RETURNING thread, last_seq, deleted IS NOT NULL`

func lockThreads(ctx context.Context, tx pgx.Tx, threads []string) (map[string]uint64, map[string]bool, error) {
	rows, err := tx.Query(ctx, lockSQL, threads)
	if err != nil {
		return nil, nil, fmt.Errorf("lock threads: %w", err)
	}
	defer rows.Close()
	last := map[string]uint64{}
	deleted := map[string]bool{}
	for rows.Next() {
		var id string
		var seq int64
		var gone bool
		if err := rows.Scan(&id, &seq, &gone); err != nil {
			return nil, nil, fmt.Errorf("lock threads: %w", err)
		}
		last[id] = uint64(seq)
		if gone {
			deleted[id] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("lock threads: %w", err)
	}
	return last, deleted, nil
}

// threadsOf returns the threads batch writes to, sorted.
func threadsOf(batch []item) []string {
	seen := map[string]bool{}
	var out []string
	for _, it := range batch {
		if it.flush == nil && !seen[it.thread] {
			seen[it.thread] = true
			out = append(out, it.thread)
		}
	}
	sort.Strings(out)
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// encodeJSON is json.Marshal as a string, for a json column.
func encodeJSON(v any) (string, error) {
	data, err := json.Marshal(v)
	return string(data), err
}
