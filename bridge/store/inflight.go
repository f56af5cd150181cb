package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/boxwire/boxwire/bridge/wire"
)

// bucketInflight holds, per thread, the JSON list of the requests the
// bridge wrote to the thread's agent that the agent has not answered yet
// (docs/resume.md, "Requests in flight"). A thread with none has no key.
var bucketInflight = []byte("inflight")

// SaveInflight queues reqs as the thread's whole list of unanswered
// requests (oldest first; empty: none) behind the events and cursors
// queued before it, like SaveCursor: it is committed in the same
// transaction as they are, or a later one, and the newest list queued for
// a thread wins. It returns at once unless the queue is full (then it
// blocks like Append). After Close it does nothing.
func (s *Store) SaveInflight(thread string, reqs []wire.Envelope) {
	s.w.SaveInflight(thread, reqs)
}

// Inflight returns the thread's stored unanswered requests, oldest first
// (none: nil).
func (s *Store) Inflight(thread string) ([]wire.Envelope, error) {
	var out []wire.Envelope
	if _, err := s.getJSON(bucketInflight, thread, &out); err != nil {
		return nil, fmt.Errorf("read requests in flight of %s: %w", thread, err)
	}
	return out, nil
}

// putInflight writes the newest list per thread of one batch; an empty
// list deletes the thread's key.
func putInflight(tx *bolt.Tx, lists map[string][]wire.Envelope) error {
	return putJSON(tx, bucketInflight, "requests in flight", lists, func(reqs []wire.Envelope) bool { return len(reqs) == 0 })
}

// deleteInflightTx removes a thread's requests in flight.
func deleteInflightTx(tx *bolt.Tx, thread string) error {
	return deleteKeyTx(tx, bucketInflight, thread)
}
