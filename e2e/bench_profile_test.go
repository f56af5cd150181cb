package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchProfileDir is where the benchmarks write the bridge's profiles
// (BOXWIRE_BENCH_PROFILE=dir): the bridge is then built with
// -tags boxwire_pprof and serves pprof on a unix socket of its data
// directory (bridge/pprof.go). Empty: no profiles.
var benchProfileDir = os.Getenv("BOXWIRE_BENCH_PROFILE")

// profileEnv is the bridge environment that turns its pprof socket on when
// profiles are asked for.
func profileEnv(e *env) []string {
	if benchProfileDir == "" {
		return nil
	}
	return []string{"BOXWIRE_PPROF_SOCKET=" + e.pprofSocket()}
}

func (e *env) pprofSocket() string { return filepath.Join(e.dataDir, "pprof.sock") }

// writeProfile saves the bridge's profile of kind ("heap", "allocs",
// "goroutine", or "profile?seconds=N" for CPU) as DIR/name.pb.gz. It does
// nothing without BOXWIRE_BENCH_PROFILE.
func writeProfile(t *testing.T, e *env, name, kind string) {
	t.Helper()
	if benchProfileDir == "" {
		return
	}
	if err := saveProfile(e, name, kind); err != nil {
		t.Errorf("bridge profile %s: %v", kind, err) // Errorf: also called from profileCPU's goroutine
	}
}

func saveProfile(e *env, name, kind string) error {
	if err := os.MkdirAll(benchProfileDir, 0o755); err != nil {
		return err
	}
	ext := ".pb.gz"
	if strings.Contains(kind, "debug=") { // text, e.g. heap?debug=1 ends with the runtime's MemStats
		ext = ".txt"
	}
	path := filepath.Join(benchProfileDir, name+ext)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fetchProfile(e, kind, f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	fmt.Printf("bench: profile %s of the bridge written to %s\n", kind, path)
	return f.Close()
}

// collectGarbage has the bridge run a garbage collection (the heap
// profile's gc=1), through its pprof socket, and returns what the Go
// runtime then holds in use in KiB: its heap spans and goroutine stacks
// (the profile's MemStats: HeapInuse and the Stack line's in use).
func collectGarbage(e *env) (inUseKiB int64, err error) {
	// Twice: what a sync.Pool holds outlives one collection (its victim
	// cache) — json's encoder keeps the buffer of the largest answer it
	// wrote there (a listing of 10,000 threads: 4 MiB).
	if err := fetchProfile(e, "heap?gc=1", io.Discard); err != nil {
		return 0, err
	}
	var text strings.Builder
	if err := fetchProfile(e, "heap?gc=1&debug=1", &text); err != nil {
		return 0, err
	}
	var heap, stack int64 = -1, -1
	for line := range strings.Lines(text.String()) {
		if v, ok := strings.CutPrefix(line, "# HeapInuse = "); ok {
			heap, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "# Stack = "); ok { // "in use / from the system"
			inUse, _, _ := strings.Cut(v, " /")
			stack, _ = strconv.ParseInt(strings.TrimSpace(inUse), 10, 64)
		}
	}
	if heap < 0 || stack < 0 {
		return 0, fmt.Errorf("no HeapInuse or Stack line in the heap profile's MemStats")
	}
	return (heap + stack) >> 10, nil
}

// fetchProfile copies the bridge's /debug/pprof/KIND to w.
func fetchProfile(e *env, kind string, w io.Writer) error {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", e.pprofSocket())
	}}, Timeout: 2 * time.Minute}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://bridge/debug/pprof/" + kind)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// profileCPU starts a CPU profile of the bridge of seconds and returns a
// wait that saves it as DIR/name.pb.gz; both do nothing without
// BOXWIRE_BENCH_PROFILE.
func profileCPU(t *testing.T, e *env, name string, seconds int) (wait func()) {
	if benchProfileDir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		writeProfile(t, e, name, fmt.Sprintf("profile?seconds=%d", seconds))
	}()
	return func() { <-done }
}
