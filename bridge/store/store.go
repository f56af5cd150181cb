package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Bucket names: threads holds one JSON Thread per id; events holds one
// bucket per thread whose keys are big-endian seqs and values JSON
// envelopes.
var (
	bucketThreads = []byte("threads")
	bucketEvents  = []byte("events")
)

// openTimeout bounds waiting for the file lock another bridge holds.
const openTimeout = 2 * time.Second

// ErrLocked means another process has the store open.
var ErrLocked = errors.New("store is in use by another process")

// Thread is what the store keeps about a thread.
type Thread struct {
	ID        string     `json:"id"`
	Box       string     `json:"box"`
	Scope     wire.Scope `json:"scope"`
	Assistant string     `json:"assistant,omitempty"`
	Image     string     `json:"image,omitempty"`
	Runtime   string     `json:"runtime,omitempty"`
	Created   time.Time  `json:"created"`
	// Suspended is when the thread's sandbox was suspended (nil while it
	// has one); SuspendedFor says why (a wire.ExitReason).
	Suspended    *time.Time      `json:"suspended,omitempty"`
	SuspendedFor wire.ExitReason `json:"suspended_for,omitempty"`
	// IdleTTL is the thread's own idle TTL (CreateThread.TTL, capped),
	// kept for a sandbox whose labels cannot say it: one the warm pool
	// started before the thread took it (docs/pool.md). Zero: the label's.
	IdleTTL time.Duration `json:"idle_ttl,omitempty"`
	// Egress are the egress rules of the thread's sandbox beside the
	// bridge's (CreateThread.Egress, canonical; docs/egress-thread.md).
	Egress []string `json:"egress,omitempty"`
	// Policy is the thread's own approval policy (CreateThread.Policy),
	// given back to the thread when it is adopted or resumed.
	Policy json.RawMessage `json:"policy,omitempty"`
	// MCP declares the thread's own MCP servers (CreateThread.MCP),
	// handed to its agent at each turn's start.
	MCP json.RawMessage `json:"mcp,omitempty"`
	// Owner is the user the thread belongs to ("" for threads from before
	// users: the admin's).
	Owner string `json:"owner,omitempty"`
}

// Options configure a Store. Zero values mean defaults.
type Options struct {
	// Retention bounds what the store keeps; see Prune.
	Retention Retention
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// QueueEvents bounds the events waiting for the writer; Append blocks
	// while it is full. Default DefaultQueueEvents.
	QueueEvents int
	// SyncInterval chooses durability. Zero: every commit is fsynced before
	// its events are released (an event a client has seen survives power
	// loss; each commit costs an fsync, about a millisecond or more). Above
	// zero: commits are written to the file without waiting for the disk,
	// and the file is fsynced at most this often — events still survive a
	// crash or kill -9 of the bridge (they are in the page cache), and power
	// loss or a kernel crash can lose at most the last interval.
	SyncInterval time.Duration
	// Holder is the lease holder (a bridge id) this store writes for, on
	// a store several bridges share: the writes of a thread whose lease
	// another holder took are dropped with ErrLeaseLost, so a bridge that
	// lost a thread cannot write into its new relay's log. Empty checks
	// nothing; the bbolt store (one bridge) ignores it.
	Holder string
}

// DefaultQueueEvents is the default bound of the writer's queue.
const DefaultQueueEvents = 65536

// Store is the bbolt-backed store. See the package doc.
type Store struct {
	db  *bolt.DB
	opt Options
	log *slog.Logger
	w   *Writer // the group commit (writer.go, commit.go)
	// leases are in memory: one process has the file (lease.go).
	leases   memLeases
	accounts *Accounts // users, keys, audit (users.go)
	once     sync.Once
	// dirty says something was committed since the last fsync; syncer
	// (SyncInterval mode) clears it, and stops when quit is closed,
	// closing synced.
	dirty  atomic.Bool
	quit   chan struct{}
	synced chan struct{}
}

// Open opens (creating if needed) the store file at path and starts its
// writer goroutine. It fails with ErrLocked when another process holds the
// file. Close stops the writer and closes the file.
func Open(path string, opt Options) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketThreads, bucketEvents, bucketActivity, bucketUsers, bucketKeys, bucketAudit, bucketApprovals} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init %s: %w", path, err)
	}
	db.NoSync = opt.SyncInterval > 0
	s := &Store{db: db, opt: opt, log: opt.Logger, accounts: &Accounts{db: db}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.w = NewWriter(WriterConfig{Commit: s.commit, Queue: opt.QueueEvents, Logger: s.log})
	s.quit, s.synced = make(chan struct{}), make(chan struct{})
	if opt.SyncInterval > 0 {
		go s.syncer(opt.SyncInterval, s.quit, s.synced)
	} else {
		close(s.synced)
	}
	return s, nil
}

// Close waits for queued appends to be written, stops the writer and
// closes the file. It is idempotent.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		s.w.Stop()
		close(s.quit)
		<-s.synced
		if s.db.NoSync {
			err = s.db.Sync()
		}
		err = errors.Join(err, s.db.Close())
	})
	return err
}

// PutThread creates or replaces a thread record.
func (s *Store) PutThread(t Thread) error {
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("encode thread %s: %w", t.ID, err)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketThreads).Put([]byte(t.ID), data)
	})
}

// Thread returns the record of id; ok is false when there is none.
func (s *Store) Thread(id string) (t Thread, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketThreads).Get([]byte(id))
		if v == nil {
			return nil
		}
		ok = true
		return json.Unmarshal(v, &t)
	})
	return t, ok, err
}

// Threads returns every thread record, oldest first.
func (s *Store) Threads() ([]Thread, error) {
	var out []Thread
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketThreads).ForEach(func(_, v []byte) error {
			var t Thread
			if err := json.Unmarshal(v, &t); err != nil {
				return err
			}
			out = append(out, t)
			return nil
		})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, err
}

// Append queues env (which must carry its seq) for the thread and returns
// at once, unless the queue is full: then it blocks until the writer has
// room. done, when not nil, is called from the writer goroutine after the
// transaction holding env committed (err nil) or failed; callbacks run in
// the order of the Append calls. After Close, done gets an error at once;
// for a thread deleted before the call, ErrDeleted.
func (s *Store) Append(thread string, env wire.Envelope, done func(error)) {
	s.w.Append(thread, env, done)
}

// AppendGroup queues evs (each carrying its seq) and, when c is not nil,
// the thread's agent cursor after them, all committed in one transaction;
// done, when not nil, gets the outcome once (store.Backend).
func (s *Store) AppendGroup(thread string, evs []wire.Envelope, c *Cursor, done func(error)) {
	s.w.AppendGroup(thread, evs, c, done)
}

// AppendNext is Append with the seq chosen by the store: one past the
// newest seq in the thread's bucket, in the transaction that writes env
// (the single writer's), so racing callers get consecutive seqs. done,
// when not nil, gets that seq (0 with an error) from the writer goroutine
// once the transaction committed or failed. See Backend.
func (s *Store) AppendNext(thread string, env wire.Envelope, done func(seq uint64, err error)) {
	s.w.AppendNext(thread, env, done)
}

// Flush blocks until every event appended before it is committed.
func (s *Store) Flush() { s.w.Flush() }

// DeleteThread removes a thread record and all its events. Appends,
// cursors and request lists of the thread queued before the call are
// written first, then removed; those queued later are dropped (Append's
// done gets ErrDeleted). A missing thread is not an error.
func (s *Store) DeleteThread(id string) error {
	s.w.MarkGone(id) // gone.go
	s.w.Flush()
	s.leases.drop(id)
	return s.db.Update(func(tx *bolt.Tx) error { return deleteThreadTx(tx, id) })
}

// LastSeq returns the seq of the thread's newest stored event, 0 if none.
func (s *Store) LastSeq(id string) (uint64, error) {
	var last uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEvents).Bucket([]byte(id))
		if b == nil {
			return nil
		}
		if k, _ := b.Cursor().Last(); k != nil {
			last = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return last, err
}

// Events returns up to limit of the thread's stored events with seq >
// after, oldest first (limit <= 0: all). Events removed by retention are
// simply absent.
func (s *Store) Events(id string, after uint64, limit int) ([]wire.Envelope, error) {
	var out []wire.Envelope
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEvents).Bucket([]byte(id))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(seqKey(after + 1)); k != nil; k, v = c.Next() {
			var env wire.Envelope
			if err := json.Unmarshal(v, &env); err != nil {
				return fmt.Errorf("event %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, env)
			if limit > 0 && len(out) >= limit {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read events of %s: %w", id, err)
	}
	return out, nil
}

func seqKey(seq uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

// Ping reports whether the store file is open.
func (s *Store) Ping(context.Context) error {
	return s.db.View(func(*bolt.Tx) error { return nil })
}
