package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/store/pgstore"
	"github.com/boxwire/boxwire/bridge/store/pgstore/pgtest"
	"github.com/boxwire/boxwire/bridge/store/storetest"
	"github.com/boxwire/boxwire/bridge/wire"
)

// server is the PostgreSQL server of this package's tests; nil unless
// BOXWIRE_PG_TESTS=1.
var server *pgtest.Server

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if pgtest.Enabled() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		srv, err := pgtest.Start(ctx)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		server = srv
		defer func() {
			if err := srv.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}()
	}
	code := m.Run()
	if err := goleak.Find(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

// newDatabase returns the URL of an empty database, or skips t.
func newDatabase(t *testing.T) string {
	t.Helper()
	if server == nil {
		t.Skip("PostgreSQL tests are off: set " + pgtest.EnvVar + "=1 (make unit does)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url, err := server.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return url
}

func open(t *testing.T, url string, opt store.Options) *pgstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := pgstore.Open(ctx, url, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The PostgreSQL store passes the suite every store.Backend passes, with
// several stores (bridges) on one database where a case races writers.
func TestBackend(t *testing.T) {
	if server == nil {
		t.Skip("PostgreSQL tests are off: set " + pgtest.EnvVar + "=1 (make unit does)")
	}
	storetest.Run(t, storetest.Config{Shared: true, New: func(t *testing.T) storetest.Open {
		url := newDatabase(t)
		return func(opt store.Options) (store.Backend, error) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			return pgstore.Open(ctx, url, opt)
		}
	}})
}

// Bridges starting together on a new database migrate it once, under the
// advisory lock; a later start finds it up to date.
func TestMigrationsOnce(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	var wg sync.WaitGroup
	stores := make([]*pgstore.Store, 4)
	errs := make([]error, len(stores))
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stores[i], errs[i] = pgstore.Open(ctx, url, store.Options{})
		}()
	}
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		v, err := s.SchemaVersion(context.Background())
		if err != nil || v != 4 {
			t.Fatalf("schema version %d, %v; want 4", v, err)
		}
		s.Close()
	}
	s := open(t, url, store.Options{})
	if v, err := s.SchemaVersion(context.Background()); err != nil || v != 4 {
		t.Fatalf("after reopen: schema version %d, %v", v, err)
	}
}

// A thread one bridge deletes stays deleted for the others: their later
// writes to it are dropped with ErrDeleted (the tombstone), and their
// other threads are unaffected.
func TestDeletionSeenByOtherBridges(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	a, b := open(t, url, store.Options{}), open(t, url, store.Options{})
	done := make(chan error, 3)
	b.Append("t1", ev(1, "x"), func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteThread("t1"); err != nil {
		t.Fatal(err)
	}
	b.Append("t1", ev(2, "late"), func(err error) { done <- err })
	b.AppendNext("t1", ev(0, "late"), func(_ uint64, err error) { done <- err })
	b.Append("t2", ev(1, "other"), func(err error) { done <- err })
	for i, want := range []error{store.ErrDeleted, store.ErrDeleted, nil} {
		if err := <-done; !errors.Is(err, want) || (want == nil && err != nil) {
			t.Fatalf("append %d: %v; want %v", i, err, want)
		}
	}
	b.SaveCursor("t1", store.Cursor{Instance: "x", Seq: 3})
	b.Flush()
	if evs, err := a.Events("t1", 0, 0); err != nil || len(evs) != 0 {
		t.Fatalf("events of the deleted thread: %d, %v", len(evs), err)
	}
	if _, ok, err := a.Cursor("t1"); ok || err != nil {
		t.Fatalf("cursor of the deleted thread: %v, %v", ok, err)
	}
}

// A store listening on the database hears of every thread's appends that
// another store (bridge) commits: first a resync notice once it listens,
// then the newest seq of each commit, until its context ends.
func TestListenAcrossBridges(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	a, b := open(t, url, store.Options{}), open(t, url, store.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	notices := make(chan store.Notice, 100)
	ended := make(chan error, 1)
	go func() { ended <- b.Listen(ctx, func(n store.Notice) { notices <- n }) }()
	defer func() {
		cancel()
		if err := <-ended; !errors.Is(err, context.Canceled) {
			t.Errorf("Listen ended with %v, want context.Canceled", err)
		}
	}()
	if n := awaitNotice(t, notices, func(n store.Notice) bool { return true }); !n.Resync {
		t.Fatalf("first notice %+v, want a resync", n)
	}
	done := make(chan error, 3)
	for seq := uint64(1); seq <= 3; seq++ {
		a.Append("t1", ev(seq, "x"), func(err error) { done <- err })
	}
	a.AppendNext("t2", ev(0, "y"), func(_ uint64, err error) { done <- err })
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// One batch notifies its threads in no fixed order: wait for both.
	want := map[string]uint64{"t1": 3, "t2": 1}
	awaitNotice(t, notices, func(n store.Notice) bool {
		if want[n.Thread] == n.Seq {
			delete(want, n.Thread)
		}
		return len(want) == 0
	})
}

// awaitNotice returns the first notice that match accepts, failing t
// after 30s.
func awaitNotice(t *testing.T, ch <-chan store.Notice, match func(store.Notice) bool) store.Notice {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case n := <-ch:
			if match(n) {
				return n
			}
		case <-deadline:
			t.Fatal("no matching notice within 30s")
		}
	}
}

// Events appended while the database is down are not lost: the writer
// commits them once it is back, in order, and only then calls their
// callbacks (a bridge sends no event it has not stored). The test has a
// PostgreSQL of its own, since it stops it.
func TestWritesWaitForTheDatabase(t *testing.T) {
	if server == nil {
		t.Skip("PostgreSQL tests are off: set " + pgtest.EnvVar + "=1 (make unit does)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, err := pgtest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	}()
	url, err := srv.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, url, store.Options{})
	done := make(chan error, 10)
	s.Append("t1", ev(1, "before"), func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := srv.Down(ctx); err != nil {
		t.Fatal(err)
	}
	var order []uint64
	var mu sync.Mutex
	for seq := uint64(2); seq <= 5; seq++ {
		s.Append("t1", ev(seq, "while down"), func(err error) {
			mu.Lock()
			order = append(order, seq)
			mu.Unlock()
			done <- err
		})
	}
	select {
	case err := <-done:
		t.Fatalf("a callback ran while the database was down: %v", err)
	case <-time.After(time.Second):
	}
	if err := srv.Up(ctx); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("append while down: %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("appends not committed within a minute of the database's return")
		}
	}
	if fmt.Sprint(order) != "[2 3 4 5]" {
		t.Fatalf("callbacks in order %v", order)
	}
	evs, err := s.Events("t1", 0, 0)
	if err != nil || len(evs) != 5 || evs[4].Seq != 5 {
		t.Fatalf("Events = %d, %v; want 1..5", len(evs), err)
	}
}

func TestIsURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"postgres://u@h/db": true, "postgresql://h/db?sslmode=disable": true,
		"/var/lib/boxwire/boxwire.db": false, "": false, "postgres": false,
	} {
		if got := pgstore.IsURL(in); got != want {
			t.Errorf("IsURL(%q) = %v", in, got)
		}
	}
}

func ev(seq uint64, text string) wire.Envelope {
	e := wire.MustNew(wire.TypeAssistantDelta, "t1", "m1", wire.Text{Text: text})
	e.Seq = seq
	return e
}
