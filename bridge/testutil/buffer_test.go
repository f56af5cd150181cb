package testutil_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/boxwire/boxwire/bridge/testutil"
)

// TestBufferConcurrent: writers on several goroutines and a reader at the
// same time (the race detector checks the lock); nothing written is lost.
func TestBufferConcurrent(t *testing.T) {
	t.Parallel()
	var b testutil.Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 400) {
		t.Fatalf("got %d bytes, want 400", len(got))
	}
}
