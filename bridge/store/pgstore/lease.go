package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boxwire/boxwire/bridge/store"
)

// Leases are rows of the leases table, decided by the database's clock
// (now()) in one statement each, so racing bridges cannot both hold one:
// the row lock of INSERT … ON CONFLICT serializes them, and the loser's
// conditional update matches no row.

// acquireSQL takes the lease when nobody has it, it expired, or holder
// has it (a renewal: same epoch); else it returns no row.
const acquireSQL = `INSERT INTO leases AS l (thread, holder, epoch, expires)
VALUES ($1, $2, 1, now() + $3 * interval '1 microsecond')
ON CONFLICT (thread) DO UPDATE SET
    holder = excluded.holder,
    epoch = CASE WHEN l.holder = excluded.holder AND l.expires > now() THEN l.epoch ELSE l.epoch + 1 END,
    expires = excluded.expires
WHERE l.holder = excluded.holder OR l.expires <= now()
RETURNING thread, holder, epoch, expires`

// AcquireLease takes the thread's lease for holder until ttl from now (by
// the database's clock), or renews it when holder has it. When another
// holder's lease has not expired it fails with store.ErrLeaseHeld and
// returns that lease.
func (s *Store) AcquireLease(ctx context.Context, thread, holder string, ttl time.Duration) (store.Lease, error) {
	l, err := scanLease(s.pool.QueryRow(ctx, acquireSQL, thread, holder, ttl.Microseconds()))
	if !errors.Is(err, pgx.ErrNoRows) {
		if err != nil {
			return store.Lease{}, fmt.Errorf("acquire lease of %s: %w", thread, err)
		}
		return l, nil
	}
	cur, err := scanLease(s.pool.QueryRow(ctx, `SELECT thread, holder, epoch, expires FROM leases WHERE thread = $1`, thread))
	if err != nil {
		return store.Lease{}, fmt.Errorf("acquire lease of %s: %w", thread, err)
	}
	return cur, fmt.Errorf("lease of %s: %w (%s)", thread, store.ErrLeaseHeld, cur.Holder)
}

// RenewLease extends holder's unexpired lease of thread to ttl from now;
// it fails with store.ErrLeaseLost when holder has none.
func (s *Store) RenewLease(ctx context.Context, thread, holder string, ttl time.Duration) (store.Lease, error) {
	l, err := scanLease(s.pool.QueryRow(ctx, `UPDATE leases SET expires = now() + $3 * interval '1 microsecond'
WHERE thread = $1 AND holder = $2 AND expires > now() RETURNING thread, holder, epoch, expires`, thread, holder, ttl.Microseconds()))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Lease{}, fmt.Errorf("lease of %s: %w", thread, store.ErrLeaseLost)
	}
	if err != nil {
		return store.Lease{}, fmt.Errorf("renew lease of %s: %w", thread, err)
	}
	return l, nil
}

// ReleaseLease ends holder's lease of thread at once; not holding it is
// not an error. The row stays, for the next holder's epoch.
func (s *Store) ReleaseLease(ctx context.Context, thread, holder string) error {
	_, err := s.pool.Exec(ctx, `UPDATE leases SET expires = now() WHERE thread = $1 AND holder = $2 AND expires > now()`, thread, holder)
	if err != nil {
		return fmt.Errorf("release lease of %s: %w", thread, err)
	}
	return nil
}

// Leases returns every unexpired lease, by thread.
func (s *Store) Leases(ctx context.Context) ([]store.Lease, error) {
	rows, err := s.pool.Query(ctx, `SELECT thread, holder, epoch, expires FROM leases WHERE expires > now() ORDER BY thread COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Lease, error) { return scanLease(r) })
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	return out, nil
}

func scanLease(r pgx.Row) (store.Lease, error) {
	var l store.Lease
	var epoch int64
	err := r.Scan(&l.Thread, &l.Holder, &epoch, &l.Expires)
	l.Epoch = uint64(epoch)
	return l, err
}

// PutBridge announces b (an empty Address forgets it).
func (s *Store) PutBridge(ctx context.Context, b store.Bridge) error {
	var err error
	if b.Address == "" {
		_, err = s.pool.Exec(ctx, `DELETE FROM bridges WHERE id = $1`, b.ID)
	} else {
		_, err = s.pool.Exec(ctx, `INSERT INTO bridges (id, address, updated) VALUES ($1, $2, now())
ON CONFLICT (id) DO UPDATE SET address = excluded.address, updated = excluded.updated`, b.ID, b.Address)
	}
	if err != nil {
		return fmt.Errorf("announce bridge %s: %w", b.ID, err)
	}
	return nil
}

// Bridges lists the announced bridges, by id.
func (s *Store) Bridges(ctx context.Context) ([]store.Bridge, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, address, updated FROM bridges ORDER BY id COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("list bridges: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Bridge, error) {
		var b store.Bridge
		err := r.Scan(&b.ID, &b.Address, &b.Updated)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("list bridges: %w", err)
	}
	return out, nil
}
