package sandbox_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
)

// Many removals at once reach the engine a few at a time, and every one
// completes. The engine here is an HTTP server on a unix socket that
// answers the Engine API's ping and container deletes (each takes 20 ms)
// and counts the deletes in flight: what the limit is about, the engine's
// view, which a real engine does not show.
func TestRemoveLimitsRemovalsInFlight(t *testing.T) {
	t.Parallel()
	var inFlight, peak, deleted atomic.Int32
	mgr := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/containers/"):
			n := inFlight.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(20 * time.Millisecond)
			inFlight.Add(-1)
			deleted.Add(1)
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Error(w, `{"message":"not here"}`, http.StatusNotFound)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 60
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = mgr.Remove(ctx, fmt.Sprintf("box%d", i)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("remove box%d: %v", i, err)
		}
	}
	if got := deleted.Load(); got != n {
		t.Errorf("the engine removed %d of %d", got, n)
	}
	if p := peak.Load(); p > 8 || p < 2 {
		t.Errorf("%d removals in flight at most; want 2 to 8 (they run a few at a time)", p)
	}
	t.Logf("%d removals, at most %d in flight", n, peak.Load())
}

// A removal waiting for its turn gives up when its context ends, saying
// so, and takes no slot from the others.
func TestRemoveWaitingEndsWithItsContext(t *testing.T) {
	t.Parallel()
	release, arrived := make(chan struct{}), make(chan struct{}, 100)
	mgr := fakeEngine(t, func(w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		<-release // every delete hangs until the test lets them go
		w.WriteHeader(http.StatusNoContent)
	})

	var wg sync.WaitGroup
	for i := range 8 { // fill every slot
		wg.Go(func() { _ = mgr.Remove(context.Background(), fmt.Sprintf("busy%d", i)) })
	}
	for range 8 {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the eight removals did not reach the engine")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := mgr.Remove(ctx, "late")
	if err == nil || !strings.Contains(err.Error(), "waiting for the engine's other removals") {
		t.Errorf("a removal with no slot before its deadline: %v; want it to say it waited", err)
	}
	close(release)
	wg.Wait()
	if err := mgr.Remove(context.Background(), "after"); err != nil {
		t.Errorf("a removal once the others ended: %v", err)
	}
}

// fakeEngine serves the Engine API's ping on a unix socket and every other
// request with handle, and returns a Docker manager connected to it. Both
// end with the test.
func fakeEngine(t *testing.T, handle http.HandlerFunc) *sandbox.Docker {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "engine.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/_ping") {
			w.Header().Set("Api-Version", "1.41")
			fmt.Fprint(w, "OK")
			return
		}
		handle(w, r)
	})}
	go srv.Serve(l) //nolint:errcheck // ends with Close below
	t.Cleanup(func() { _ = srv.Close() })
	mgr, err := sandbox.NewDocker(sandbox.DockerConfig{Host: "unix://" + sock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Close() })
	return mgr
}
