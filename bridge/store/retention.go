package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// bucketActivity maps a thread id to the unix time (seconds, big-endian) of
// its newest stored event.
var bucketActivity = []byte("activity")

// Retention bounds what the store keeps. Zero fields mean no bound.
type Retention struct {
	// MaxAge deletes a thread (record and events) whose newest event is
	// older than this, unless the caller says it is live.
	MaxAge time.Duration
	// MaxEvents keeps at most this many of a thread's newest events.
	MaxEvents int
	// MaxBytes keeps at most about this many bytes of a thread's newest
	// events (encoded size).
	MaxBytes int64
}

// PruneStats says what Prune removed.
type PruneStats struct {
	Threads int // threads deleted for age
	Events  int // events dropped for count or size
}

// Prune applies the store's retention at now. live reports threads that
// must not be deleted for age (their events may still be trimmed); one
// bridge has the file, so live knows every relayed thread (PostgreSQL's
// Prune also keeps leased ones). It
// returns the ids of the threads it deleted; later writes to them are
// dropped, as after DeleteThread.
func (s *Store) Prune(now time.Time, live func(id string) bool) (PruneStats, []string, error) {
	s.w.Flush()
	r := s.opt.Retention
	var st PruneStats
	var gone []string
	err := s.db.Update(func(tx *bolt.Tx) error {
		act, err := tx.CreateBucketIfNotExists(bucketActivity)
		if err != nil {
			return err
		}
		events := tx.Bucket(bucketEvents)
		if err := dropApprovalsTx(tx, nil, now.Add(-ApprovalKeep)); err != nil {
			return err
		}
		if r.MaxAge > 0 {
			var old []string
			_ = act.ForEach(func(k, v []byte) error {
				last := time.Unix(int64(binary.BigEndian.Uint64(v)), 0)
				if now.Sub(last) > r.MaxAge && (live == nil || !live(string(k))) {
					old = append(old, string(k))
				}
				return nil
			})
			for _, id := range old {
				if err := deleteThreadTx(tx, id); err != nil {
					return err
				}
				gone = append(gone, id)
			}
			st.Threads = len(old)
		}
		if r.MaxEvents <= 0 && r.MaxBytes <= 0 {
			return nil
		}
		return events.ForEachBucket(func(k []byte) error {
			n, err := trim(events.Bucket(k), r)
			st.Events += n
			return err
		})
	})
	if err != nil {
		return st, gone, fmt.Errorf("prune: %w", err)
	}
	s.w.MarkGone(gone...) // gone.go: a late write must not bring one back
	s.leases.drop(gone...)
	return st, gone, nil
}

// trim drops the oldest events of b past r's count and size bounds.
func trim(b *bolt.Bucket, r Retention) (int, error) {
	var count int
	var size int64
	c := b.Cursor()
	var cut []byte // newest key to drop
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		count++
		size += int64(len(v))
		if count > 1 && ((r.MaxEvents > 0 && count > r.MaxEvents) || (r.MaxBytes > 0 && size > r.MaxBytes)) {
			cut = append([]byte(nil), k...)
			break
		}
	}
	if cut == nil {
		return 0, nil
	}
	n := 0
	for k, _ := c.First(); k != nil && string(k) <= string(cut); k, _ = c.First() {
		if err := b.Delete(k); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func deleteThreadTx(tx *bolt.Tx, id string) error {
	if err := tx.Bucket(bucketThreads).Delete([]byte(id)); err != nil {
		return err
	}
	if err := deleteCursorTx(tx, id); err != nil { // cursor.go
		return err
	}
	if err := deleteInflightTx(tx, id); err != nil { // inflight.go
		return err
	}
	if err := dropApprovalsTx(tx, []string{id}, time.Time{}); err != nil { // approval.go
		return err
	}
	if act := tx.Bucket(bucketActivity); act != nil {
		if err := act.Delete([]byte(id)); err != nil {
			return err
		}
	}
	err := tx.Bucket(bucketEvents).DeleteBucket([]byte(id))
	if errors.Is(err, berrors.ErrBucketNotFound) {
		return nil
	}
	return err
}

// touch records now as the thread's newest activity.
func touch(tx *bolt.Tx, id string, now time.Time) error {
	act, err := tx.CreateBucketIfNotExists(bucketActivity)
	if err != nil {
		return err
	}
	v := make([]byte, 8)
	binary.BigEndian.PutUint64(v, uint64(now.Unix()))
	return act.Put([]byte(id), v)
}
