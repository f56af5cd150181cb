package shell_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/boxwire/boxwire/agent/shell"
	"github.com/boxwire/boxwire/bridge/testutil"
)

// heldWriter is an Output whose first Write waits for release, so that
// the program's output piles up in the terminal meanwhile; it records the
// size of every Write.
type heldWriter struct {
	entered chan struct{} // receives once when the first Write has begun (capacity 1)
	release chan struct{}
	once    sync.Once

	mu    sync.Mutex
	sizes []int
	total int
}

func (w *heldWriter) Write(p []byte) (int, error) {
	w.once.Do(func() {
		w.entered <- struct{}{}
		<-w.release
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sizes = append(w.sizes, len(p))
	w.total += len(p)
	return len(p), nil
}

func (w *heldWriter) state() (sizes []int, total int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.sizes...), w.total
}

// Output that waits in the terminal reaches Output in one Write, not in
// reads of the line discipline's 4 KiB each: the reader gathers what the
// terminal holds before it writes, so bulk output travels in large frames.
func TestHeldOutputIsGathered(t *testing.T) {
	// held is what the program writes while Output waits: more than one
	// read's 4 KiB, well under what a terminal holds (about 17 KiB).
	const held = 8 << 10
	dir := t.TempDir()
	goFile, done := filepath.Join(dir, "go"), filepath.Join(dir, "done")
	w := &heldWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(w.release) }) }
	script := fmt.Sprintf("printf x; while [ ! -e %s ]; do sleep 0.01; done; head -c %d /dev/zero; touch %s; exec sleep 60", goFile, held, done)
	p, err := shell.Start(t.Context(), shell.Spec{Command: bash(script), Output: w})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		release() // Close waits for the last Write
		_ = p.Close()
	})
	testutil.RequireReceive(t, "the first Write", w.entered, waitLimit)
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, "the program wrote its output", waitLimit, func() error {
		_, err := os.Stat(done)
		return err
	})
	release()
	testutil.Until(t, "every byte", waitLimit, func() error {
		if _, total := w.state(); total != 1+held {
			return fmt.Errorf("%d bytes of %d", total, 1+held)
		}
		return nil
	})
	if sizes, _ := w.state(); len(sizes) != 2 {
		t.Errorf("writes of %v bytes: the %d bytes held in the terminal came in %d writes, want 1", sizes, held, len(sizes)-1)
	}
}
