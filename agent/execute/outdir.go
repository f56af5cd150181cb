package execute

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// outputStore keeps the full output of commands as files in one directory,
// whose total size it bounds by deleting the oldest files no command is
// still writing. It is safe for concurrent use.
type outputStore struct {
	dir   string
	limit int64 // total bytes kept
	log   *slog.Logger

	mu     sync.Mutex
	inUse  map[string]bool
	seq    int
	failed bool // the directory could not be created: keep no files
}

// outFile is one command's full output. Its methods are called from one
// goroutine at a time.
type outFile struct {
	store   *outputStore
	path    string
	f       *os.File
	written int64
	capped  bool
}

// create opens a new output file named after id; nil when the directory
// is unusable (the command runs on without a full-output file).
func (s *outputStore) create(id string) *outFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		return nil
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		s.failed = true
		s.log.Warn("output directory unusable; full outputs are not kept", "dir", s.dir, "err", err)
		return nil
	}
	s.seq++
	name := fmt.Sprintf("%s-%d-%s.log", time.Now().Format("20060102-150405"), s.seq, id)
	path := filepath.Join(s.dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		s.log.Warn("create output file", "path", path, "err", err)
		return nil
	}
	s.inUse[path] = true
	return &outFile{store: s, path: path, f: f}
}

// Write appends p until the file reaches half the store's limit; later
// bytes are dropped (and the file marked capped). It never fails.
func (o *outFile) Write(p []byte) (int, error) {
	if o == nil || o.f == nil {
		return len(p), nil
	}
	room := o.store.limit/2 - o.written
	k := int64(len(p))
	if k > room {
		k, o.capped = max(room, 0), true
	}
	n, err := o.f.Write(p[:k])
	o.written += int64(n)
	if err != nil {
		o.capped = true
		_ = o.f.Close()
		o.f = nil
	}
	return len(p), nil
}

// finish closes the file; keep false removes it. Then the store is
// pruned.
func (o *outFile) finish(keep bool) {
	if o == nil {
		return
	}
	if o.f != nil {
		_ = o.f.Close()
		o.f = nil
	}
	if !keep {
		_ = os.Remove(o.path)
	}
	o.store.mu.Lock()
	delete(o.store.inUse, o.path)
	o.store.mu.Unlock()
	o.store.prune()
}

// prune deletes the oldest files not in use until the directory's files
// total at most the limit.
func (s *outputStore) prune() {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	type file struct {
		path string
		size int64
		mod  time.Time
	}
	var files []file
	var total int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		files = append(files, file{filepath.Join(s.dir, e.Name()), info.Size(), info.ModTime()})
		total += info.Size()
	}
	slices.SortFunc(files, func(a, b file) int { return a.mod.Compare(b.mod) })
	for _, f := range files {
		if total <= s.limit {
			break
		}
		if s.inUse[f.path] {
			continue
		}
		if os.Remove(f.path) == nil {
			total -= f.size
		}
	}
}
