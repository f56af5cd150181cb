package store

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// nextSeq is the seq an AppendNext event gets (commit.go): the one after
// the newest in the thread's events bucket.
func nextSeq(b *bolt.Bucket) uint64 {
	k, _ := b.Cursor().Last()
	if k == nil {
		return 1
	}
	return binary.BigEndian.Uint64(k) + 1
}
