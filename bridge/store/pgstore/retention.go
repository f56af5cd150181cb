package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boxwire/boxwire/bridge/store"
)

// tombstoneKeep is how long a deleted thread's tombstone drops late
// writes; Prune forgets older ones. Late writes come from a deleted
// thread's last goroutines, moments after the deletion, and thread ids are
// random and never reused.
const tombstoneKeep = 7 * 24 * time.Hour

// trimSQL drops, per thread, the oldest events past $1 events or $2
// bytes (0: no bound), counting from the newest, which always stays.
const trimSQL = `WITH ranked AS (
    SELECT thread, seq, row_number() OVER w AS n, sum(size) OVER w AS bytes
    FROM events WINDOW w AS (PARTITION BY thread ORDER BY seq DESC)
), cut AS (
    SELECT thread, max(seq) AS seq FROM ranked
    WHERE n > 1 AND (($1::bigint > 0 AND n > $1::bigint) OR ($2::bigint > 0 AND bytes > $2::bigint))
    GROUP BY thread
)
DELETE FROM events e USING cut WHERE e.thread = cut.thread AND e.seq <= cut.seq`

// Prune applies the store's retention at now, as the bbolt store's
// Prune does: threads whose newest event was written more than MaxAge
// before now, that live does not report and that no unexpired lease
// names (another bridge relays them) are deleted (tombstoned, so later
// writes to them are dropped); the oldest events of every thread past
// MaxEvents or MaxBytes are dropped. It returns the ids it deleted.
// Tombstones older than a week are forgotten.
func (s *Store) Prune(now time.Time, live func(id string) bool) (store.PruneStats, []string, error) {
	s.w.Flush()
	r := s.opt.Retention
	var st store.PruneStats
	ctx, cancel := s.ctx()
	defer cancel()
	var gone []string
	if r.MaxAge > 0 {
		var err error
		if gone, err = s.pruneAge(ctx, now.Add(-r.MaxAge), live); err != nil {
			return st, nil, fmt.Errorf("prune: %w", err)
		}
		st.Threads = len(gone)
		s.w.MarkGone(gone...)
	}
	if r.MaxEvents > 0 || r.MaxBytes > 0 {
		tag, err := s.pool.Exec(ctx, trimSQL, int64(r.MaxEvents), r.MaxBytes)
		if err != nil {
			return st, gone, fmt.Errorf("prune: trim: %w", err)
		}
		st.Events = int(tag.RowsAffected())
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM thread_logs WHERE deleted < $1`, now.Add(-tombstoneKeep)); err != nil {
		return st, gone, fmt.Errorf("prune: tombstones: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM approvals WHERE created < $1`, now.Add(-store.ApprovalKeep)); err != nil {
		return st, gone, fmt.Errorf("prune: approvals: %w", err)
	}
	return st, gone, nil
}

// notLeased is true of a thread_logs row t whose thread has no unexpired
// lease (by the database's clock): a thread another bridge relays is
// live though this bridge's live does not know it.
const notLeased = `NOT EXISTS (SELECT 1 FROM leases l WHERE l.thread = t.thread AND l.expires > now())`

// pruneAge deletes the threads whose newest event is older than cutoff
// and that are neither live nor leased, and returns their ids.
func (s *Store) pruneAge(ctx context.Context, cutoff time.Time, live func(string) bool) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT thread FROM thread_logs t WHERE deleted IS NULL AND activity < $1 AND `+notLeased, cutoff)
	if err != nil {
		return nil, err
	}
	old, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var cand []string
	for _, id := range old {
		if live == nil || !live(id) {
			cand = append(cand, id)
		}
	}
	if len(cand) == 0 {
		return nil, nil
	}
	var gone []string
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Lock them, in thread order like the writer; one written to
		// since the first look is no longer old and stays.
		rows, err := tx.Query(ctx, `SELECT thread FROM thread_logs t WHERE thread = ANY($1) AND deleted IS NULL AND activity < $2
AND `+notLeased+` ORDER BY thread COLLATE "C" FOR UPDATE`, cand, cutoff)
		if err != nil {
			return err
		}
		if gone, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(gone) == 0 {
			return err
		}
		return deleteThreads(ctx, tx, gone)
	})
	return gone, err
}
