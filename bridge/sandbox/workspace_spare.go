package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Formatting a new workspace's image (mkfs.ext4 and debugfs: two
// processes, 20-40 ms on a loaded 2-core host) was most of what a new
// thread's sandbox cost beyond the engine's create and start. So the
// workspaces keep one image formatted ahead, <Dir>/spare-<hex>.spare: a
// create takes it by hard-linking it to its own image name (which fails
// when that name exists, as the exclusive create did) and a goroutine
// formats the next one. A create that finds none formats its own as
// before. The spare has never been mounted: it is an empty filesystem of
// the configured size, as a freshly formatted one is. It is formatted
// under <name>.spare.part and renamed to its .spare name once ready, so a
// *.spare file is always one a create can take. Close removes it; one (or
// a part) left by a bridge killed is removed by the next CheckWorkspaces
// and by CollectWorkspaces (neither name is a *.img, so neither is ever
// taken for a volume's image).

// spareSuffix ends a spare image's name; partSuffix follows it while the
// image is being formatted.
const (
	spareSuffix = ".spare"
	partSuffix  = ".part"
)

// spareImage is the workspaces' image formatted ahead; its mutex guards
// the fields.
type spareImage struct {
	mu     sync.Mutex
	path   string // a formatted image ready to take; "" none
	part   string // the image a goroutine is formatting; "" none (removeSpares keeps it)
	closed bool
	wg     sync.WaitGroup // the formatting goroutine
}

// takeSpare makes the spare image img, when there is one; taken reports
// whether it did. err is set only when img exists already.
func (w *workspaces) takeSpare(img string) (taken bool, err error) {
	s := &w.spare
	s.mu.Lock()
	p := s.path
	s.path = ""
	s.mu.Unlock()
	if p == "" {
		return false, nil
	}
	if err := os.Link(p, img); err != nil {
		if errors.Is(err, os.ErrExist) {
			s.mu.Lock()
			if s.path == "" && !s.closed {
				s.path, p = p, ""
			}
			s.mu.Unlock()
			if p != "" {
				_ = os.Remove(p)
			}
			return false, err
		}
		w.log.Warn("take the spare workspace image; formatting one", "err", err)
		_ = os.Remove(p)
		return false, nil
	}
	if err := os.Remove(p); err != nil {
		w.log.Warn("remove the spare workspace image's old name", "image", p, "err", err)
	}
	return true, nil
}

// refill formats a new spare image on a goroutine unless there is one,
// one is being made, or the workspaces are closed or uncapped.
func (w *workspaces) refill() {
	s := &w.spare
	s.mu.Lock()
	defer s.mu.Unlock()
	if !w.cfg.Capped() || s.closed || s.part != "" || s.path != "" {
		return
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	p := filepath.Join(w.cfg.Dir, "spare-"+hex.EncodeToString(b[:])+spareSuffix)
	s.part = p + partSuffix
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		err := w.makeImage(ctx, p+partSuffix) // workspace.go
		s.mu.Lock()
		s.part = ""
		keep := err == nil && !s.closed
		if keep { // under the lock: a *.spare is one the next take finds
			if err = os.Rename(p+partSuffix, p); err == nil {
				s.path = p
			}
		}
		s.mu.Unlock()
		if err != nil {
			w.log.Warn("format a spare workspace image", "err", err)
		}
		if !keep || err != nil {
			_ = os.Remove(p + partSuffix)
		}
	}()
}

// closeSpare stops refilling, waits for a spare being formatted and
// removes the spare.
func (w *workspaces) closeSpare() {
	s := &w.spare
	s.mu.Lock()
	s.closed = true
	p := s.path
	s.path = ""
	s.mu.Unlock()
	s.wg.Wait()
	if p != "" {
		_ = os.Remove(p)
	}
}

// removeSpares removes every spare image (and part of one) in Dir but the
// one held now and the one being formatted: those a bridge killed left. It
// returns how many it removed.
func (w *workspaces) removeSpares() (int, error) {
	if w.cfg.Dir == "" {
		return 0, nil
	}
	found, err := filepath.Glob(filepath.Join(w.cfg.Dir, "*"+spareSuffix))
	if err != nil {
		return 0, err
	}
	parts, err := filepath.Glob(filepath.Join(w.cfg.Dir, "*"+spareSuffix+partSuffix))
	if err != nil {
		return 0, err
	}
	w.spare.mu.Lock()
	held, part := w.spare.path, w.spare.part
	w.spare.mu.Unlock()
	n := 0
	var errs []error
	for _, p := range append(found, parts...) {
		if p == held || p == part {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove spare workspace image: %w", err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
