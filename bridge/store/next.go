package store

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/boxwire/boxwire/bridge/wire"
)

// AppendNext is Append with the seq chosen by the store: one past the
// newest seq in the thread's bucket, in the transaction that writes env
// (the single writer's), so racing callers get consecutive seqs. done,
// when not nil, gets that seq (0 with an error) from the writer goroutine
// once the transaction committed or failed. See Backend.
func (s *Store) AppendNext(thread string, env wire.Envelope, done func(seq uint64, err error)) {
	if done == nil {
		done = func(uint64, error) {}
	}
	if err := s.enqueue(item{thread: thread, env: env, next: done}); err != nil {
		done(0, fmt.Errorf("append to %s: %w", thread, err))
	}
}

// nextSeq is the seq after the newest one in a thread's events bucket.
func nextSeq(b *bolt.Bucket) uint64 {
	k, _ := b.Cursor().Last()
	if k == nil {
		return 1
	}
	return binary.BigEndian.Uint64(k) + 1
}

// committedSeq is what an AppendNext callback gets: the seq, or 0 when
// the commit failed.
func committedSeq(it item, err error) uint64 {
	if err != nil {
		return 0
	}
	return it.env.Seq
}
