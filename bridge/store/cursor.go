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
	s.w.SaveCursor(thread, c)
}

// Cursor returns the thread's stored cursor; ok is false when there is
// none.
func (s *Store) Cursor(thread string) (c Cursor, ok bool, err error) {
	ok, err = s.getJSON(bucketCursors, thread, &c)
	if err != nil {
		return Cursor{}, false, fmt.Errorf("read agent cursor of %s: %w", thread, err)
	}
	return c, ok, nil
}

// putCursors writes the newest cursor per thread of one batch.
func putCursors(tx *bolt.Tx, cursors map[string]*Cursor) error {
	return putJSON(tx, bucketCursors, "agent cursor", cursors, nil)
}

// deleteCursorTx removes a thread's cursor.
func deleteCursorTx(tx *bolt.Tx, thread string) error {
	return deleteKeyTx(tx, bucketCursors, thread)
}
