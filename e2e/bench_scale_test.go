package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// Sizes of the scale figure (issue 21: what one bridge holds).
const (
	scaleStored     = 10000 // suspended threads in the store, each with a short log
	scaleLive       = 100   // live threads, each with its sandbox
	scaleConns      = 2000  // idle client connections over the live threads
	scaleStoredLogs = 3     // events in each stored thread's log
)

// benchScale: a bridge holding scaleStored suspended threads in its store
// and scaleConns idle client connections over scaleLive live threads. It
// reports the bridge's start with that store, listing the threads, the
// bridge's RSS at each step (per stored thread, per live thread with its
// sandbox, per idle connection), and pings every connection at the end:
// each one must answer.
func benchScale(t *testing.T, _ *env, r *report) {
	e := newEnv(t, helloScript)
	// The pprof socket, profiles or not: each reading starts with a garbage
	// collection through it (settledRSS).
	opts := []string{"BOXWIRE_MAX_SANDBOXES=0", "BOXWIRE_PPROF_SOCKET=" + e.pprofSocket()}
	b := e.startBridge(opts...)
	empty, _ := settledRSS(t, e, b)
	b.stop(t)

	seedStore(t, e.dataDir, scaleStored)
	began := time.Now()
	b = e.startBridge(opts...)
	startTook := time.Since(began)

	var list struct {
		Threads []wire.ThreadInfo `json:"threads"`
	}
	began = time.Now()
	if code := e.api("GET", "/v1/threads", nil, &list); code != 200 || len(list.Threads) != scaleStored {
		t.Fatalf("list threads: status %d, %d threads, want %d", code, len(list.Threads), scaleStored)
	}
	listTook := time.Since(began)
	// After the listing: before it, what the listing leaves (its answer's
	// buffer, kept for the next) fell into the live threads' share.
	stored, storedGo := settledRSS(t, e, b)
	writeProfile(t, e, "scale-heap-stored", "heap") // pprof -base it under scale-heap-live: what the live threads hold
	writeProfile(t, e, "scale-goroutines-stored", "goroutine?debug=1")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	liveConns := dialAll(t, ctx, e, make([]string, scaleLive), 8) // sandboxes start 8 at a time
	threads := make([]string, scaleLive)
	for i, c := range liveConns {
		threads[i] = c.Thread()
	}
	live, liveGo := settledRSS(t, e, b)
	writeProfile(t, e, "scale-heap-live", "heap")
	writeProfile(t, e, "scale-goroutines-live", "goroutine?debug=1")
	idle := make([]string, scaleConns-scaleLive) // with the first ones: scaleConns connections
	for i := range idle {
		idle[i] = threads[i%scaleLive]
	}
	conns := append(liveConns, dialAll(t, ctx, e, idle, 32)...)
	connected, connectedGo := settledRSS(t, e, b)
	fds, fdLimit := openFiles(t, b.cmd.Process.Pid)
	writeProfile(t, e, "scale-heap", "heap")

	pings := make([]time.Duration, len(conns))
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i, c := range conns {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			pings[i], errs[i] = c.Ping(ctx)
		})
	}
	wg.Wait()
	answered := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("connection %d (thread %s) did not answer a ping: %v", i, conns[i].Thread(), err)
			continue
		}
		answered++
	}
	for _, c := range conns {
		c.Close()
	}
	deleteThreads(t, ctx, e, threads)

	perStored := float64(stored-empty) / scaleStored
	perLive := float64(live-stored) / scaleLive
	perConn := float64(connected-live) / float64(scaleConns-scaleLive)
	goNote := "the Go runtime's heap spans and stacks in use after two collections (its MemStats), a steadier reading than RSS"
	if storedGo >= 0 && liveGo >= 0 && connectedGo >= 0 {
		r.add(figure{name: "scale_go_kib_per_live", value: float64(liveGo-storedGo) / scaleLive, unit: "KiB",
			note: fmt.Sprintf("%s: %d KiB with the store → %d KiB with %d live threads", goNote, storedGo, liveGo, scaleLive)})
		r.add(figure{name: "scale_go_kib_per_conn", value: float64(connectedGo-liveGo) / float64(scaleConns-scaleLive), unit: "KiB",
			note: fmt.Sprintf("%s: → %d KiB with %d more idle connections", goNote, connectedGo, scaleConns-scaleLive)})
	}
	r.add(figure{name: "scale_ping_ok", value: float64(answered), unit: fmt.Sprintf("of%d", scaleConns),
		target: "every connection answers", met: met(answered == len(conns)),
		note: fmt.Sprintf("%d idle connections over %d live threads, %d suspended threads stored; ping p50 %.1f ms, p99 %.1f ms (64 at a time)",
			len(conns), scaleLive, scaleStored, medianMS(pings), percentileMS(pings, 99))})
	r.add(figure{name: "scale_start", value: startTook.Seconds() * 1000, unit: "ms",
		note: fmt.Sprintf("bridge start until it listens, with %d suspended threads (%d events each) stored", scaleStored, scaleStoredLogs)})
	r.add(figure{name: "scale_list", value: listTook.Seconds() * 1000, unit: "ms",
		note: fmt.Sprintf("GET /v1/threads of %d suspended threads", scaleStored)})
	r.add(figure{name: "scale_kib_per_stored", value: perStored, unit: "KiB",
		note: fmt.Sprintf("bridge RSS %d KiB empty → %d KiB with the store, after listing it", empty, stored)})
	r.add(figure{name: "scale_kib_per_live", value: perLive, unit: "KiB",
		note: fmt.Sprintf("bridge RSS → %d KiB with %d live threads (thread + sandbox + one client each)", live, scaleLive)})
	r.add(figure{name: "scale_kib_per_conn", value: perConn, unit: "KiB",
		note: fmt.Sprintf("bridge RSS → %d KiB with %d more idle connections; %d files open (limit %s)", connected, scaleConns-scaleLive, fds, fdLimit)})
}

// openFiles counts the file descriptors process pid has open, and reads
// its soft limit of them (Go raises it to the hard limit at start).
func openFiles(t *testing.T, pid int) (int, string) {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("count open files: %v", err)
	}
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatalf("read limits: %v", err)
	}
	limit := "?"
	for _, line := range strings.Split(string(limits), "\n") {
		if f := strings.Fields(line); strings.HasPrefix(line, "Max open files") && len(f) >= 4 {
			limit = f[3]
		}
	}
	return len(ents), limit
}

// settledRSS is the bridge's VmRSS once it is idle, and what its Go
// runtime holds in use (heap spans and stacks, KiB; -1 unknown): after
// garbage collections (collectGarbage, through its pprof socket), a second
// after the last change, read again until two readings a second apart
// agree within 1%, at most ten times. Without the collection a reading
// held whatever garbage the last step left (the start's, a listing's) or
// not, by chance: three runs gave 47.6, -39.5 and 31.2 KiB a live thread.
func settledRSS(t *testing.T, e *env, b *bridgeProc) (rss, goInUse int64) {
	t.Helper()
	goInUse, err := collectGarbage(e) // bench_profile_test.go
	if err != nil {
		t.Logf("no garbage collection before the reading: %v", err)
		goInUse = -1
	}
	pid := b.cmd.Process.Pid
	last := rssKiB(t, pid)
	for range 10 {
		time.Sleep(time.Second)
		now := rssKiB(t, pid)
		if diff := now - last; diff*100 <= last && -diff*100 <= last {
			return now, goInUse
		}
		last = now
	}
	return last, goInUse
}

// seedStore writes n suspended threads, each with a short log, into the
// store file of a data directory no bridge has open.
func seedStore(t *testing.T, dataDir string, n int) {
	t.Helper()
	st, err := store.Open(filepath.Join(dataDir, server.StoreFile), store.Options{SyncInterval: time.Hour})
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	at := time.Now().Add(-time.Hour)
	var wg sync.WaitGroup
	for i := range n {
		id := fmt.Sprintf("t_scale%06d", i)
		suspended := at.Add(time.Duration(i) * time.Millisecond)
		err := st.PutThread(store.Thread{ID: id, Box: "b_scale" + id[7:], Scope: wire.ScopeThread,
			Image: image, Created: suspended.Add(-time.Minute), Suspended: &suspended, SuspendedFor: wire.ExitIdle})
		if err != nil {
			t.Fatalf("store thread %s: %v", id, err)
		}
		for seq := uint64(1); seq <= scaleStoredLogs; seq++ {
			wg.Add(1)
			env := wire.MustNew(wire.TypeUserEcho, id, "m", wire.UserMessage{Text: "hello"})
			env.Seq = seq
			st.Append(id, env,
				func(err error) {
					defer wg.Done()
					if err != nil {
						t.Errorf("append to %s: %v", id, err)
					}
				})
		}
	}
	wg.Wait()
	if err := st.Close(); err != nil {
		t.Fatalf("close the store: %v", err)
	}
}

// dialAll opens a client connection to each thread named (a new thread
// for ""), at most par at a time, and closes them when the test ends.
func dialAll(t *testing.T, ctx context.Context, e *env, threads []string, par int) []*chat.Conn {
	t.Helper()
	conns := make([]*chat.Conn, len(threads))
	errs := make([]error, len(threads))
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	for i, id := range threads {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			conns[i], errs[i] = chat.Dial(ctx, chat.Config{URL: e.bridge.url + wire.Path, Token: e.token, Thread: id})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("connection %d of %d (thread %q): %v", i, len(threads), threads[i], err)
		}
		t.Cleanup(func() { conns[i].Close() })
	}
	return conns
}
