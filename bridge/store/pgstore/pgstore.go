package pgstore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/boxwire/boxwire/bridge/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationTable records which migrations a database has had.
const migrationTable = "boxwire_migrations"

// commitRetry is the first wait before the writer commits a failed batch
// again (store.WriterConfig.Retry).
const commitRetry = 100 * time.Millisecond

// opTimeout bounds one call to the database.
const opTimeout = 30 * time.Second

// IsURL reports whether s names a PostgreSQL database (postgres:// or
// postgresql://) rather than a file.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Store is the PostgreSQL store. See the package doc.
type Store struct {
	pool *pgxpool.Pool
	opt  store.Options
	log  *slog.Logger
	w    *store.Writer // the group commit; commit is ours (writer.go)
	once sync.Once
	// accounts are the users, keys and audit log (users.go).
	accounts *Accounts
}

var _ store.Backend = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or a libpq
// key=value string), brings its schema up to date and starts the writer.
// opt.SyncInterval above zero turns synchronous_commit off for the
// store's sessions: a commit does not wait for the server's WAL flush, as
// the bbolt store's does not wait for fsync (a crash of the database
// server can lose the last moments; a crash of the bridge loses nothing).
// The context bounds connecting and migrating only. Close stops the
// writer and closes the connections.
func Open(ctx context.Context, url string, opt store.Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err) // pgx redacts the password
	}
	if opt.SyncInterval > 0 {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "boxwire-bridge"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: connect to %s: %w", cfg.ConnConfig.Host, err)
	}
	s := &Store{pool: pool, opt: opt, log: opt.Logger, accounts: &Accounts{pool: pool}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	// A failed batch is committed again until the database is back:
	// events are not lost to a database restart (their callers wait).
	s.w = store.NewWriter(store.WriterConfig{Commit: s.commit, Queue: opt.QueueEvents, Logger: s.log, Retry: commitRetry})
	return s, nil
}

// migrate applies the migrations the database has not had yet, holding
// an advisory lock so that bridges starting at once do it one at a time.
func (s *Store) migrate(ctx context.Context) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithTableName(migrationTable),
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true), goose.WithSlog(s.log))
	if err != nil {
		return fmt.Errorf("pgstore: migrations: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	for _, r := range res {
		s.log.Info("store schema migrated", "version", r.Source.Version, "file", r.Source.Path, "took", r.Duration)
	}
	return nil
}

// SchemaVersion returns the newest migration the database has had.
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	var v sql.NullInt64
	err := s.pool.QueryRow(ctx, "SELECT max(version_id) FROM "+migrationTable+" WHERE is_applied").Scan(&v)
	return v.Int64, err
}

// Close waits for queued writes to be committed, stops the writer and
// closes the connections. It is idempotent.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.w.Stop()
		s.pool.Close()
	})
	return nil
}

// ctx is the context of one call to the database.
func (s *Store) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("pgstore: ping: %w", err)
	}
	return nil
}
