package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// The writer is store.Writer, the bbolt store's too; what differs is
// commit: a thread's deletion may come from another bridge, so commit
// reads each thread's tombstone (thread_logs.deleted) under the lock it
// takes anyway, drops that thread's writes and reports it, and the Writer
// refuses the thread's later writes at once. Likewise a thread whose
// lease another bridge holds (Options.Holder): its writes in the batch
// are dropped (store.ErrLeaseLost), the lease row read under a share
// lock so a takeover waits for the commit and the new relay then reads
// the log with it.

// Append queues env, which carries its seq, for the thread's log and
// returns at once unless the queue is full (then it blocks until there is
// room). done, when not nil, is called from the writer goroutine once the
// transaction holding env committed (nil) or failed; callbacks run in the
// order of the calls. After Close done gets an error at once; for a thread
// deleted before the call, here or by another bridge, store.ErrDeleted.
func (s *Store) Append(thread string, env wire.Envelope, done func(error)) {
	s.w.Append(thread, env, done)
}

// AppendGroup queues evs (each carrying its seq) and, when c is not nil,
// the thread's agent cursor after them, all committed in one transaction;
// done, when not nil, gets the outcome once (store.Backend).
func (s *Store) AppendGroup(thread string, evs []wire.Envelope, c *store.Cursor, done func(error)) {
	s.w.AppendGroup(thread, evs, c, done)
}

// AppendNext is Append with the seq chosen in the committing transaction
// while the thread's row is locked: one past the newest committed seq, so
// writers in any number of bridges get consecutive seqs. done, when not
// nil, gets that seq (0 with an error).
func (s *Store) AppendNext(thread string, env wire.Envelope, done func(seq uint64, err error)) {
	s.w.AppendNext(thread, env, done)
}

// SaveCursor queues c as the thread's agent cursor behind the events
// queued before it. After Close, or for a deleted thread, it does nothing.
func (s *Store) SaveCursor(thread string, c store.Cursor) { s.w.SaveCursor(thread, c) }

// SaveInflight queues reqs as the thread's whole list of requests in
// flight (empty: none) behind the events queued before it.
func (s *Store) SaveInflight(thread string, reqs []wire.Envelope) { s.w.SaveInflight(thread, reqs) }

// Flush blocks until everything queued before it is committed.
func (s *Store) Flush() { s.w.Flush() }

// AppendLatency is the latency of the events this store committed since
// it opened (the writer's).
func (s *Store) AppendLatency() store.Latency { return s.w.AppendLatency() }

// commit writes batch in one transaction. It first locks the thread_logs
// row of every thread in the batch, in thread order (so two bridges'
// batches cannot deadlock), reading each thread's newest seq and whether
// it was deleted; then numbers the AppendNext events, and writes events,
// newest seqs, cursors and lists of requests in flight. It returns the
// threads it found deleted or leased by another holder, with why: their
// items were dropped.
func (s *Store) commit(batch []store.Item) (map[string]error, error) {
	threads := threadsOf(batch)
	ctx, cancel := s.ctx()
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	last, dropped, err := lockThreads(ctx, tx, threads)
	if err != nil {
		return nil, err
	}
	if err := s.fence(ctx, tx, threads, dropped); err != nil {
		return nil, err
	}
	b, err := writes(batch, last, dropped, time.Now())
	if err != nil {
		return nil, err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return dropped, nil
}

// fence adds to dropped the threads whose unexpired lease another holder
// than Options.Holder has: another bridge took them. It share-locks the
// batch's lease rows, in thread order, so an acquire waits for this
// commit and the new holder then reads the log with it.
func (s *Store) fence(ctx context.Context, tx pgx.Tx, threads []string, dropped map[string]error) error {
	if s.opt.Holder == "" {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT thread, holder <> $2 AND expires > now() FROM leases WHERE thread = ANY($1)
ORDER BY thread COLLATE "C" FOR SHARE`, threads, s.opt.Holder)
	if err != nil {
		return fmt.Errorf("read leases: %w", err)
	}
	var id string
	var taken bool
	_, err = pgx.ForEachRow(rows, []any{&id, &taken}, func() error {
		if taken && dropped[id] == nil {
			dropped[id] = store.ErrLeaseLost
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read leases: %w", err)
	}
	return nil
}

// lockSQL creates the rows of threads new to the log and locks them all,
// in thread order, in one statement.
const lockSQL = `INSERT INTO thread_logs (thread) SELECT t FROM unnest($1::text[]) AS t ORDER BY t COLLATE "C"
ON CONFLICT (thread) DO UPDATE SET thread = excluded.thread
RETURNING thread, last_seq, deleted IS NOT NULL`

func lockThreads(ctx context.Context, tx pgx.Tx, threads []string) (map[string]uint64, map[string]error, error) {
	rows, err := tx.Query(ctx, lockSQL, threads)
	if err != nil {
		return nil, nil, fmt.Errorf("lock threads: %w", err)
	}
	defer rows.Close()
	last := map[string]uint64{}
	deleted := map[string]error{}
	for rows.Next() {
		var id string
		var seq int64
		var gone bool
		if err := rows.Scan(&id, &seq, &gone); err != nil {
			return nil, nil, fmt.Errorf("lock threads: %w", err)
		}
		last[id] = uint64(seq)
		if gone {
			deleted[id] = store.ErrDeleted
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("lock threads: %w", err)
	}
	return last, deleted, nil
}

// threadsOf returns the threads batch writes to, sorted.
func threadsOf(batch []store.Item) []string {
	seen := map[string]bool{}
	var out []string
	for _, it := range batch {
		if !seen[it.Thread] {
			seen[it.Thread] = true
			out = append(out, it.Thread)
		}
	}
	sort.Strings(out)
	return out
}

// encodeJSON is json.Marshal as a string, for a json column.
func encodeJSON(v any) (string, error) {
	data, err := json.Marshal(v)
	return string(data), err
}
