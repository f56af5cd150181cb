package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/boxwire/boxwire/bridge/store"
)

// eventsChannel is the channel every commit with events notifies, in the
// committing transaction (so the notice is delivered once it commits):
// one payload per thread, "<thread> <newest seq>".
const eventsChannel = "boxwire_events"

// notifySQL queues a notice per thread of the batch (writes, batch.go).
const notifySQL = `SELECT pg_notify('` + eventsChannel + `', t || ' ' || s) FROM unnest($1::text[], $2::bigint[]) AS v(t, s)`

// listenRetry is how long Listen waits before it connects again.
const listenRetry = time.Second

var _ store.Listener = (*Store)(nil)

// Listen calls f with every thread's newest seq as commits of any store
// on the database (any bridge) append to it, until ctx ends; it returns
// ctx's error. It holds one connection of its own (LISTEN). A notice may
// cover several events (the newest of a batch), and notices are lost
// while the connection is down: so after each (re)connection f gets a
// Notice with Resync set, and the caller reads the store again for what it
// follows. Connection failures are logged and retried every second. f is
// called from Listen's goroutine, one notice at a time.
func (s *Store) Listen(ctx context.Context, f func(store.Notice)) error {
	for {
		err := s.listenOnce(ctx, f)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Warn("store: listen for events", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(listenRetry):
		}
	}
}

// listenOnce listens on one connection until it fails or ctx ends; the
// connection is closed, not given back to the pool, since it listens.
func (s *Store) listenOnce(ctx context.Context, f func(store.Notice)) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := c.Hijack()
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+eventsChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	f(store.Notice{Resync: true})
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if notice, ok := parseNotice(n); ok {
			f(notice)
		}
	}
}

// parseNotice reads a notice's "<thread> <seq>" payload.
func parseNotice(n *pgconn.Notification) (store.Notice, bool) {
	thread, seq, ok := strings.Cut(n.Payload, " ")
	if !ok || n.Channel != eventsChannel {
		return store.Notice{}, false
	}
	v, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return store.Notice{}, false
	}
	return store.Notice{Thread: thread, Seq: v}, true
}
