package store

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/boxwire/boxwire/bridge/wire"
)

// commit is the bbolt store's Commit (writer.go): batch in one
// transaction. Deleted threads' writes were refused before they were
// queued (one process writes the file), so it reports none.
func (s *Store) commit(batch []Item) (map[string]error, error) {
	defer s.dirty.Store(true)
	now := time.Now()
	return nil, s.db.Update(func(tx *bolt.Tx) error {
		events := tx.Bucket(bucketEvents)
		cursors := map[string]*Cursor{}
		inflight := map[string][]wire.Envelope{}
		for i := range batch {
			it := &batch[i]
			if it.Cursor != nil {
				cursors[it.Thread] = it.Cursor // the newest wins
				continue
			}
			if it.Inflight != nil {
				inflight[it.Thread] = *it.Inflight // the newest wins (inflight.go)
				continue
			}
			b, err := events.CreateBucketIfNotExists([]byte(it.Thread))
			if err != nil {
				return fmt.Errorf("events bucket of %s: %w", it.Thread, err)
			}
			if it.Next != nil {
				it.Env.Seq = nextSeq(b) // next.go
			}
			data, err := json.Marshal(it.Env)
			if err != nil {
				return fmt.Errorf("encode event %d of %s: %w", it.Env.Seq, it.Thread, err)
			}
			if err := b.Put(seqKey(it.Env.Seq), data); err != nil {
				return err
			}
			if err := touch(tx, it.Thread, now); err != nil {
				return err
			}
		}
		if err := putInflight(tx, inflight); err != nil {
			return err
		}
		return putCursors(tx, cursors)
	})
}

// syncer fsyncs the file every interval when something was committed
// since the last time (SyncInterval mode), until quit is closed.
func (s *Store) syncer(interval time.Duration, quit <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-quit:
			return
		case <-tick.C:
		}
		if s.dirty.Swap(false) {
			if err := s.db.Sync(); err != nil {
				s.log.Error("sync the store", "err", err)
			}
		}
	}
}
