package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The browser sessions (bridge/web's SharedSessions): rows of
// web_sessions, keyed by the SHA-256 of a session cookie's value (the
// value itself is never stored), holding the session as bridge/web
// encodes it. Every bridge on the database reads them, so a browser
// logged in through one bridge is logged in through all.

// PutWebSession keeps the session data under key until expires, and
// deletes the sessions that expired.
func (s *Store) PutWebSession(ctx context.Context, key string, data []byte, expires time.Time) error {
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM web_sessions WHERE expires <= now()`)
	b.Queue(`INSERT INTO web_sessions (key, data, expires) VALUES ($1, $2, $3)
ON CONFLICT (key) DO UPDATE SET data = excluded.data, expires = excluded.expires`, key, data, expires)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("keep browser session: %w", err)
	}
	return nil
}

// WebSession returns the data of the unexpired session under key; ok is
// false when there is none.
func (s *Store) WebSession(ctx context.Context, key string) (data []byte, ok bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT data FROM web_sessions WHERE key = $1 AND expires > now()`, key).Scan(&data)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("read browser session: %w", err)
	}
	return data, true, nil
}

// DeleteWebSession ends the session under key; none there is not an
// error.
func (s *Store) DeleteWebSession(ctx context.Context, key string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM web_sessions WHERE key = $1`, key); err != nil {
		return fmt.Errorf("end browser session: %w", err)
	}
	return nil
}
