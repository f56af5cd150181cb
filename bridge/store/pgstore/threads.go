package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// PutThread creates or replaces a thread record.
func (s *Store) PutThread(t store.Thread) error {
	data, err := encodeJSON(t)
	if err != nil {
		return fmt.Errorf("encode thread %s: %w", t.ID, err)
	}
	ctx, cancel := s.ctx()
	defer cancel()
	_, err = s.pool.Exec(ctx, `INSERT INTO threads (id, created, owner, record) VALUES ($1, $2, $3, $4::json)
ON CONFLICT (id) DO UPDATE SET created = excluded.created, owner = excluded.owner, record = excluded.record`,
		t.ID, t.Created, t.Owner, data)
	if err != nil {
		return fmt.Errorf("put thread %s: %w", t.ID, err)
	}
	return nil
}

// Thread returns the record of id; ok is false when there is none.
func (s *Store) Thread(id string) (t store.Thread, ok bool, err error) {
	ok, err = s.getJSON(`SELECT record::text FROM threads WHERE id = $1`, id, &t)
	if err != nil {
		return store.Thread{}, false, fmt.Errorf("read thread %s: %w", id, err)
	}
	return t, ok, nil
}

// Threads returns every thread record, oldest first.
func (s *Store) Threads() ([]store.Thread, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT record::text FROM threads ORDER BY created, id COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	out, err := collectJSON[store.Thread](rows)
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	return out, nil
}

// DeleteThread removes a thread record, its events, cursor and requests
// in flight, and leaves a tombstone: writes to the thread queued after
// the call, here or in another bridge, are dropped (store.ErrDeleted).
// Those queued here before it are committed first. A missing thread is
// not an error.
func (s *Store) DeleteThread(id string) error {
	s.w.MarkGone(id)
	s.w.Flush()
	ctx, cancel := s.ctx()
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return deleteThreads(ctx, tx, []string{id})
	})
	if err != nil {
		return fmt.Errorf("delete thread %s: %w", id, err)
	}
	return nil
}

// deleteThreads removes ids and marks them deleted, in tx.
func deleteThreads(ctx context.Context, tx pgx.Tx, ids []string) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO thread_logs (thread, deleted) SELECT t, now() FROM unnest($1::text[]) AS t ORDER BY t COLLATE "C"
ON CONFLICT (thread) DO UPDATE SET deleted = now(), last_seq = 0, activity = NULL`, ids)
	for _, table := range []string{"events", "agent_cursors", "inflight", "leases"} {
		b.Queue(`DELETE FROM `+table+` WHERE thread = ANY($1)`, ids)
	}
	b.Queue(`DELETE FROM approvals WHERE threads && $1::text[]`, ids)
	b.Queue(`DELETE FROM threads WHERE id = ANY($1)`, ids)
	return tx.SendBatch(ctx, b).Close()
}

// LastSeq returns the seq of the thread's newest stored event, 0 if none.
func (s *Store) LastSeq(id string) (uint64, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	var last int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM events WHERE thread = $1`, id).Scan(&last)
	if err != nil {
		return 0, fmt.Errorf("last seq of %s: %w", id, err)
	}
	return uint64(last), nil
}

// Events returns up to limit of the thread's stored events with seq >
// after, oldest first (limit <= 0: all).
func (s *Store) Events(id string, after uint64, limit int) ([]wire.Envelope, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	ctx, cancel := s.ctx()
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT envelope::text FROM events WHERE thread = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
		id, int64(after), lim)
	if err != nil {
		return nil, fmt.Errorf("read events of %s: %w", id, err)
	}
	out, err := collectJSON[wire.Envelope](rows)
	if err != nil {
		return nil, fmt.Errorf("read events of %s: %w", id, err)
	}
	return out, nil
}

// Cursor returns the thread's stored agent cursor; ok is false when there
// is none.
func (s *Store) Cursor(thread string) (c store.Cursor, ok bool, err error) {
	ok, err = s.getJSON(`SELECT cursor::text FROM agent_cursors WHERE thread = $1`, thread, &c)
	if err != nil {
		return store.Cursor{}, false, fmt.Errorf("read agent cursor of %s: %w", thread, err)
	}
	return c, ok, nil
}

// Inflight returns the thread's stored unanswered requests, oldest first
// (none: nil).
func (s *Store) Inflight(thread string) ([]wire.Envelope, error) {
	var out []wire.Envelope
	if _, err := s.getJSON(`SELECT requests::text FROM inflight WHERE thread = $1`, thread, &out); err != nil {
		return nil, fmt.Errorf("read requests in flight of %s: %w", thread, err)
	}
	return out, nil
}

// getJSON decodes the one JSON value query selects for key into v; found
// is false when there is none.
func (s *Store) getJSON(query, key string, v any) (found bool, err error) {
	ctx, cancel := s.ctx()
	defer cancel()
	var data []byte
	err = s.pool.QueryRow(ctx, query, key).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, json.Unmarshal(data, v)
}

// collectJSON decodes each row's one JSON column, and closes rows.
func collectJSON[T any](rows pgx.Rows) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var v T
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
