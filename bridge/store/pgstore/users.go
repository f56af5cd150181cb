package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boxwire/boxwire/bridge/auth"
)

// Users, keys and the audit log (auth.Store) are written at once, each
// in its own statement or transaction, not through the writer.
var _ auth.Store = (*Accounts)(nil)

// Accounts are the store's users, keys and audit log: its auth.Store
// (Store.Accounts). They share the store's connection pool and end with its Close.
type Accounts struct {
	pool *pgxpool.Pool
}

// Accounts returns the store's users, keys and audit log.
func (s *Store) Accounts() auth.Store { return s.accounts }

// PutUser writes u.
func (a *Accounts) PutUser(ctx context.Context, u auth.User) error {
	return a.putRecord(ctx, `INSERT INTO users (name, record) VALUES ($1, $2::json)
ON CONFLICT (name) DO UPDATE SET record = excluded.record`, "user "+u.Name, u, u.Name)
}

// User returns the user name, or an error wrapping auth.ErrNotFound.
func (a *Accounts) User(ctx context.Context, name string) (u auth.User, err error) {
	return u, a.getRecord(ctx, `SELECT record::text FROM users WHERE name = $1`, "users", name, &u)
}

// Users lists every user, by name.
func (a *Accounts) Users(ctx context.Context) ([]auth.User, error) {
	rows, err := a.pool.Query(ctx, `SELECT record::text FROM users ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return collectJSON[auth.User](rows)
}

// DeleteUser removes the user name and every key of theirs, in one
// transaction.
func (a *Accounts) DeleteUser(ctx context.Context, name string) error {
	return pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`DELETE FROM users WHERE name = $1`, name)
		b.Queue(`DELETE FROM keys WHERE "user" = $1`, name)
		return tx.SendBatch(ctx, b).Close()
	})
}

// PutKey writes k.
func (a *Accounts) PutKey(ctx context.Context, k auth.Key) error {
	return a.putRecord(ctx, `INSERT INTO keys (id, "user", record) VALUES ($1, $3, $2::json)
ON CONFLICT (id) DO UPDATE SET "user" = excluded."user", record = excluded.record`, "key "+k.ID, k, k.ID, k.User)
}

// Key returns the key id, or an error wrapping auth.ErrNotFound.
func (a *Accounts) Key(ctx context.Context, id string) (k auth.Key, err error) {
	return k, a.getRecord(ctx, `SELECT record::text FROM keys WHERE id = $1`, "keys", id, &k)
}

// Keys lists the keys of user, or every key when user is "", by id.
func (a *Accounts) Keys(ctx context.Context, user string) ([]auth.Key, error) {
	rows, err := a.pool.Query(ctx, `SELECT record::text FROM keys WHERE $1 = '' OR "user" = $1 ORDER BY id COLLATE "C"`, user)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return collectJSON[auth.Key](rows)
}

// AppendAudit appends e to the audit log.
func (a *Accounts) AppendAudit(ctx context.Context, e auth.AuditEntry) error {
	data, err := encodeJSON(e)
	if err != nil {
		return fmt.Errorf("encode audit entry: %w", err)
	}
	_, err = a.pool.Exec(ctx, `INSERT INTO audit (time, "user", action, thread, entry) VALUES ($1, $2, $3, $4, $5::json)`,
		e.Time, e.User, e.Action, e.Thread, data)
	if err != nil {
		return fmt.Errorf("append audit entry: %w", err)
	}
	return nil
}

// Audit returns the entries that match f, oldest first (the newest
// f.Limit when set).
func (a *Accounts) Audit(ctx context.Context, f auth.AuditFilter) ([]auth.AuditEntry, error) {
	var lim *int
	if f.Limit > 0 {
		lim = &f.Limit
	}
	rows, err := a.pool.Query(ctx, `SELECT entry::text FROM (
    SELECT id, entry FROM audit
    WHERE ($1 = '' OR "user" = $1) AND ($2 = '' OR action = $2) AND ($3 = '' OR thread = $3) AND time >= $4
    ORDER BY id DESC LIMIT $5
) newest ORDER BY id`, f.User, f.Action, f.Thread, f.Since, lim)
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return collectJSON[auth.AuditEntry](rows)
}

func (a *Accounts) putRecord(ctx context.Context, query, what string, v any, args ...any) error {
	data, err := encodeJSON(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", what, err)
	}
	if _, err := a.pool.Exec(ctx, query, append([]any{args[0], data}, args[1:]...)...); err != nil {
		return fmt.Errorf("put %s: %w", what, err)
	}
	return nil
}

func (a *Accounts) getRecord(ctx context.Context, query, table, key string, v any) error {
	var data []byte
	err := a.pool.QueryRow(ctx, query, key).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s %q: %w", table, key, auth.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("read %s %q: %w", table, key, err)
	}
	return json.Unmarshal(data, v)
}
