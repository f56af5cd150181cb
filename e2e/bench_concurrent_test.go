package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/client/chat"
)

// concurrentOpen is how many of the concurrent figures' sessions (each a
// new thread, so a new sandbox) are opened at a time.
const concurrentOpen = 8

// concurrentIdle is how long the sessions sit open and idle before their
// commands start: what the machine does then is in the note.
const concurrentIdle = 10 * time.Second

// benchConcurrent: 100 sessions, each its own thread and sandbox, all
// running a small command at once, on the run's bridge.
func benchConcurrent(t *testing.T, e *env, r *report) {
	c := runConcurrent(t, e, 100)
	r.add(figure{name: "concurrent_ok", value: float64(c.ok), unit: "of100", target: "all succeed", met: met(c.ok == 100),
		note: fmt.Sprintf("100 sessions (own thread and sandbox each) ran `echo $((6*7))` at once; open, each took %.1f MiB of the host's memory and %.0f of its threads; %s",
			c.memPer, c.tasksPer, c.loadNote())})
	r.add(figure{name: "concurrent_p50", value: medianMS(c.lat), unit: "ms", samples: msOf(c.lat),
		target: "≤ 1 s", met: met(medianMS(c.lat) <= 1000), note: "latency of those commands, median"})
	r.add(figure{name: "concurrent_p99", value: percentileMS(c.lat, 99), unit: "ms", note: "latency of those commands, 99th percentile"})
}

// benchConcurrent300: the same with 300 sessions, on a bridge of its own
// (no sandboxes of other figures beside them).
func benchConcurrent300(t *testing.T, _ *env, r *report) {
	const n = 300
	e := newEnv(t, helloScript)
	e.startBridge(append([]string{"BOXWIRE_MAX_SANDBOXES=0"}, profileEnv(e)...)...)
	c := runConcurrent(t, e, n)
	unit := fmt.Sprintf("of%d", n)
	r.add(figure{name: "concurrent300_ok", value: float64(c.ok), unit: unit, target: "all succeed", met: met(c.ok == n),
		note: fmt.Sprintf("%d sessions (own thread and sandbox each, opened %d at a time in %.0f s) ran `echo $((6*7))` at once; %s",
			n, concurrentOpen, c.opened.Seconds(), c.loadNote())})
	r.add(figure{name: "concurrent300_p50", value: medianMS(c.lat), unit: "ms", samples: msOf(c.lat), note: "latency of those commands, median"})
	r.add(figure{name: "concurrent300_p99", value: percentileMS(c.lat, 99), unit: "ms", note: "latency of those commands, 99th percentile"})
	r.add(figure{name: "concurrent300_host_per_sandbox", value: c.memPer, unit: "MiB",
		note: "the host's memory in use (MemTotal − MemAvailable) with the sessions open and idle, less before the first, per sandbox: agent, shell, engine shim, kernel, the bridge's share"})
	r.add(figure{name: "concurrent300_tasks_per_sandbox", value: c.tasksPer, unit: "tasks",
		note: "the host's threads (/proc/loadavg) with the sessions open, less before, per sandbox: what counts against kernel.pid_max"})
}

// concurrent is what runConcurrent measured.
type concurrent struct {
	ok     int             // sessions whose command succeeded
	lat    []time.Duration // of the commands that succeeded
	opened time.Duration   // to open every session
	// burst is the load average as the commands started, ended when the
	// last one ended; peak the highest 1-minute load seen from the first
	// session's opening to then.
	burst, ended [3]float64
	peak         float64
	idle         string // cpuNote of the concurrentIdle before the commands
	// memPer and tasksPer are the host's memory in use (MiB) and threads
	// added per open session, read before the first opening and once all
	// are open (hostUse).
	memPer, tasksPer float64
}

func (c concurrent) loadNote() string {
	return fmt.Sprintf("load average %.1f/%.1f/%.1f as they started, %.1f/%.1f/%.1f when the last ended, 1-minute peak %.1f from the first opening; in the %s before they started, all open and idle: %s",
		c.burst[0], c.burst[1], c.burst[2], c.ended[0], c.ended[1], c.ended[2], c.peak, concurrentIdle, c.idle)
}

// runConcurrent opens n sessions, each a new thread with its own sandbox
// (concurrentOpen at a time), has every one run a small command at the
// same moment, then deletes the threads at once and requires that
// nothing of them is left (deleteThreads). A session that could not be
// opened or whose command failed fails the test and is not counted in ok;
// the figure still reports how many succeeded.
func runConcurrent(t *testing.T, e *env, n int) concurrent {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var c concurrent
	stopLoad := peakLoad(&c.peak)
	defer stopLoad()
	mem0, tasks0 := hostUse()
	began := time.Now()
	conns := make([]*chat.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, concurrentOpen)
	for i := range conns {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			conns[i], errs[i] = chat.Dial(ctx, chat.Config{URL: e.bridge.url, Token: e.token})
		})
	}
	wg.Wait()
	c.opened = time.Since(began)
	failed := map[string]int{} // what failed, by message, with how many
	var threads []string
	for i, err := range errs {
		if err != nil {
			failed["open: "+err.Error()]++
			continue
		}
		defer conns[i].Close()
		threads = append(threads, conns[i].Thread())
	}
	lat := make([]time.Duration, n)
	start := make(chan struct{})
	for i, conn := range conns {
		if conn == nil {
			continue
		}
		wg.Go(func() {
			<-start
			t0 := time.Now()
			res, err := runTool(ctx, conn, "c", "execute", map[string]any{"command": "echo $((6*7))"})
			lat[i] = time.Since(t0)
			if err == nil && (res.ExitCode == nil || *res.ExitCode != 0 || res.Output != "42\n") {
				err = fmt.Errorf("result %+v", res)
			}
			errs[i] = err
		})
	}
	if len(threads) > 0 {
		mem, tasks := hostUse()
		c.memPer, c.tasksPer = (mem-mem0)/float64(len(threads)), float64(tasks-tasks0)/float64(len(threads))
	}
	cpu0 := takeCPU() // bench_cpu_test.go
	time.Sleep(concurrentIdle)
	c.idle = cpuNote(cpu0, takeCPU(), concurrentIdle, 4)
	c.burst = loadAvg()
	close(start)
	wg.Wait()
	c.ended = loadAvg()
	stopLoad()
	for i, err := range errs {
		switch {
		case conns[i] == nil: // counted above
		case err != nil:
			failed["command: "+err.Error()]++
		default:
			c.ok++
			c.lat = append(c.lat, lat[i])
		}
	}
	for _, msg := range slices.Sorted(maps.Keys(failed)) {
		t.Errorf("%d of %d sessions failed: %s", failed[msg], n, msg)
	}
	deleteThreads(t, ctx, e, threads)
	return c
}

// peakLoad samples the 1-minute load average every second into *peak
// until the returned stop is called; *peak may be read after it. Stop is
// idempotent.
func peakLoad(peak *float64) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			*peak = max(*peak, loadAvg()[0])
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}

// hostUse returns the host's memory in use, MemTotal − MemAvailable in
// MiB, and how many threads (tasks) it runs; zeros when /proc cannot be
// read.
func hostUse() (mib float64, tasks int) {
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		kib := map[string]float64{}
		for line := range strings.Lines(string(data)) {
			if f := strings.Fields(line); len(f) >= 2 {
				kib[strings.TrimSuffix(f[0], ":")], _ = strconv.ParseFloat(f[1], 64)
			}
		}
		mib = (kib["MemTotal"] - kib["MemAvailable"]) / 1024
	}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) >= 4 {
			_, all, _ := strings.Cut(f[3], "/")
			tasks, _ = strconv.Atoi(all)
		}
	}
	return mib, tasks
}
