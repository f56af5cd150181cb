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

// outFile is one command's full output. Until the output outgrows hold
// bytes (what the model is shown whole) it is held in memory and no file
// exists: most commands end before that, and then there is no file to
// make, remove and prune for. Its name is taken when the command starts,
// as if the file were made then. Its methods are called from one
// goroutine at a time.
type outFile struct {
	store   *outputStore
	hold    int
	held    []byte // the output so far, while no file was made
	opened  bool   // open was called
	path    string // the file's; "" when it could not be made
	f       *os.File
	written int64
	capped  bool
}

// newFile returns the full output of job id, held in memory until it
// outgrows hold bytes or open is called.
func (s *outputStore) newFile(id string, hold int) *outFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := &outFile{store: s, hold: hold}
	if !s.failed {
		s.seq++
		o.path = filepath.Join(s.dir, fmt.Sprintf("%s-%d-%s.log", time.Now().Format("20060102-150405"), s.seq, id))
	}
	return o
}

// create makes the output file at path; nil when the directory is
// unusable (the command runs on without a full-output file).
func (s *outputStore) create(path string) *os.File {
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
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		s.log.Warn("create output file", "path", path, "err", err)
		return nil
	}
	s.inUse[path] = true
	return f
}

// open makes the file, if it was not made yet, and writes what was held
// to it: for output that outgrew the hold, or a job that went on in the
// background (whose output job_output reads from the file).
func (o *outFile) open() {
	if o.opened {
		return
	}
	o.opened = true
	if o.path != "" {
		if o.f = o.store.create(o.path); o.f == nil {
			o.path = ""
		}
	}
	held := o.held
	o.held = nil
	o.write(held)
}

// Write holds p, or appends it to the file once made. It never fails.
func (o *outFile) Write(p []byte) (int, error) {
	if !o.opened && len(o.held)+len(p) <= o.hold {
		o.held = append(o.held, p...)
		return len(p), nil
	}
	o.open()
	o.write(p)
	return len(p), nil
}

// write appends p until the file reaches half the store's limit; later
// bytes are dropped (and the file marked capped).
func (o *outFile) write(p []byte) {
	if o.f == nil {
		return
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
}

// finish closes the file; keep false removes it. Then the store is
// pruned. Output still held is dropped: a file to keep was opened.
func (o *outFile) finish(keep bool) {
	o.held = nil
	if !o.opened || o.path == "" {
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
