package store

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Besides its events, a thread keeps small JSON records in buckets of
// their own, one key per thread: its agent cursor (cursor.go) and its
// requests in flight (inflight.go). They are queued through the writer
// like events (enqueue, writer.go), so each is committed with or after the
// events queued before it, and the newest one queued per thread wins; after
// Close, or for a deleted thread, they are dropped.

// getJSON decodes the thread's value in bucket into v; found is false when
// there is none.
func (s *Store) getJSON(bucket []byte, thread string, v any) (found bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		data := b.Get([]byte(thread))
		if data == nil {
			return nil
		}
		found = true
		return json.Unmarshal(data, v)
	})
	return found, err
}

// putJSON writes one batch's newest value per thread into bucket, JSON
// encoded; a value for which drop reports true deletes the thread's key
// instead. what names the values in errors.
func putJSON[T any](tx *bolt.Tx, bucket []byte, what string, values map[string]T, drop func(T) bool) error {
	if len(values) == 0 {
		return nil
	}
	b, err := tx.CreateBucketIfNotExists(bucket)
	if err != nil {
		return fmt.Errorf("%s bucket: %w", bucket, err)
	}
	for thread, v := range values {
		if drop != nil && drop(v) {
			if err := b.Delete([]byte(thread)); err != nil {
				return err
			}
			continue
		}
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode %s of %s: %w", what, thread, err)
		}
		if err := b.Put([]byte(thread), data); err != nil {
			return err
		}
	}
	return nil
}

// deleteKeyTx removes the thread's key from bucket, if there is one.
func deleteKeyTx(tx *bolt.Tx, bucket []byte, thread string) error {
	if b := tx.Bucket(bucket); b != nil {
		return b.Delete([]byte(thread))
	}
	return nil
}
