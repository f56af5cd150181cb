package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/wire"
)

// awaitAny returns the next event, failing the test after wait.
func (s *session) awaitAny(wait time.Duration) wire.Envelope {
	s.t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case ev, ok := <-s.conn.Events():
		if !ok {
			s.t.Fatalf("connection ended: %v", s.conn.Err())
		}
		return ev
	case <-timer.C:
		s.t.Fatalf("no event within %v", wait)
	}
	return wire.Envelope{}
}

// awaitStoredInflight waits until the bridge's store file holds, among
// the thread's requests in flight, one whose payload contains text: the
// state a bridge killed now restarts from. The bridge holds the file's
// lock, so each poll reads a copy; a copy taken mid-write may not open
// or read, and is retried.
func (e *env) awaitStoredInflight(thread, text string) {
	e.t.Helper()
	dir := e.t.TempDir()
	waitFor(e.t, "the request in flight in the store", func() bool {
		return storedInflightHas(filepath.Join(e.dataDir, server.StoreFile), filepath.Join(dir, "copy.db"), thread, text)
	})
}

// storedInflightHas copies the store file src to dst and reports whether
// the copy's inflight list of thread has a request containing text.
func storedInflightHas(src, dst, thread, text string) (found bool) {
	defer func() {
		if recover() != nil { // a torn copy can trip bbolt: not yet
			found = false
		}
	}()
	data, err := os.ReadFile(src)
	if err != nil || os.WriteFile(dst, data, 0o600) != nil {
		return false
	}
	db, err := bolt.Open(dst, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return false
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("inflight")); b != nil {
			found = strings.Contains(string(b.Get([]byte(thread))), text)
		}
		return nil
	})
	return found
}
