package store

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// bucketCursors holds one JSON Cursor per thread: where the thread's log
// of its agent's own numbering ends (docs/resume.md).
var bucketCursors = []byte("agent_cursors")

// Cursor is a thread's position in its agent's event numbering: the agent
// process (Instance) and the newest agent seq (Seq) whose event is in the
// thread's log. Held is opaque state the bridge keeps with it (output it
// held back and has not logged yet), restored with the cursor.
type Cursor struct {
	Instance string          `json:"instance"`
	Seq      uint64          `json:"seq"`
	Held     json.RawMessage `json:"held,omitempty"`
}

// SaveCursor queues c as the thread's cursor behind the events appended
// before it: it is committed in the same transaction as they are, or a
// later one, so a stored cursor is never ahead of the stored events. It
// returns at once unless the queue is full (then it blocks like Append).
// After Close it does nothing.
func (s *Store) SaveCursor(thread string, c Cursor) {
	w := &s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.closed && len(w.queue) >= s.opt.QueueEvents {
		w.cond.Wait()
	}
	if w.closed {
		return
	}
	w.queue = append(w.queue, item{thread: thread, cursor: &c})
	w.cond.Broadcast()
}

// Cursor returns the thread's stored cursor; ok is false when there is
// none.
func (s *Store) Cursor(thread string) (c Cursor, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCursors)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(thread))
		if v == nil {
			return nil
		}
		ok = true
		return json.Unmarshal(v, &c)
	})
	if err != nil {
		return Cursor{}, false, fmt.Errorf("read agent cursor of %s: %w", thread, err)
	}
	return c, ok, nil
}

// putCursors writes the newest cursor per thread of one batch.
func putCursors(tx *bolt.Tx, cursors map[string]*Cursor) error {
	if len(cursors) == 0 {
		return nil
	}
	b, err := tx.CreateBucketIfNotExists(bucketCursors)
	if err != nil {
		return fmt.Errorf("cursors bucket: %w", err)
	}
	for thread, c := range cursors {
		data, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("encode agent cursor of %s: %w", thread, err)
		}
		if err := b.Put([]byte(thread), data); err != nil {
			return err
		}
	}
	return nil
}

// deleteCursorTx removes a thread's cursor.
func deleteCursorTx(tx *bolt.Tx, thread string) error {
	if b := tx.Bucket(bucketCursors); b != nil {
		return b.Delete([]byte(thread))
	}
	return nil
}
