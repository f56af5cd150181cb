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

// Approvals are rows of the approvals table, written at once. The first
// decision wins because DecideApproval updates only an undecided row,
// under its row lock.

// PutApproval creates or replaces a.
func (s *Store) PutApproval(ctx context.Context, a store.Approval) error {
	data, err := encodeJSON(a)
	if err != nil {
		return fmt.Errorf("encode approval %s: %w", a.ID, err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO approvals (id, threads, created, decided, record) VALUES ($1, $2, $3, $4, $5::json)
ON CONFLICT (id) DO UPDATE SET threads = excluded.threads, created = excluded.created, decided = excluded.decided, record = excluded.record`,
		a.ID, a.Threads, a.Created, a.Decision != nil, data)
	if err != nil {
		return fmt.Errorf("put approval %s: %w", a.ID, err)
	}
	return nil
}

// Approval returns the approval id; ok is false when there is none.
func (s *Store) Approval(ctx context.Context, id string) (a store.Approval, ok bool, err error) {
	ok, err = s.getJSON(`SELECT record::text FROM approvals WHERE id = $1`, id, &a)
	if err != nil {
		return store.Approval{}, false, fmt.Errorf("read approval %s: %w", id, err)
	}
	return a, ok, nil
}

// Approvals returns the thread's undecided approvals, oldest first.
func (s *Store) Approvals(ctx context.Context, thread string) ([]store.Approval, error) {
	rows, err := s.pool.Query(ctx, `SELECT record::text FROM approvals WHERE threads @> ARRAY[$1::text] AND NOT decided
ORDER BY created, id COLLATE "C"`, thread)
	if err != nil {
		return nil, fmt.Errorf("read approvals of %s: %w", thread, err)
	}
	out, err := collectJSON[store.Approval](rows)
	if err != nil {
		return nil, fmt.Errorf("read approvals of %s: %w", thread, err)
	}
	return out, nil
}

// DecideApproval stores d as the decision of approval id unless it has
// one: won reports whether d is now its decision, a is the approval with
// whichever decision stands. An unknown id is store.ErrNoApproval.
func (s *Store) DecideApproval(ctx context.Context, id string, d wire.ApprovalDecision) (a store.Approval, won bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var data []byte
		err := tx.QueryRow(ctx, `SELECT record::text FROM approvals WHERE id = $1 FOR UPDATE`, id).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNoApproval
		}
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &a); err != nil {
			return err
		}
		if a.Decision != nil {
			return nil
		}
		a.Decision, won = &d, true
		rec, err := encodeJSON(a)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE approvals SET decided = true, record = $2::json WHERE id = $1`, id, rec)
		return err
	})
	if err != nil {
		return store.Approval{}, false, fmt.Errorf("decide approval %s: %w", id, err)
	}
	return a, won, nil
}

// DeleteApproval removes the approval id; a missing one is not an error.
func (s *Store) DeleteApproval(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM approvals WHERE id = $1`, id); err != nil {
		return fmt.Errorf("delete approval %s: %w", id, err)
	}
	return nil
}
