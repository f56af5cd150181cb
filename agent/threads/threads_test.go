package threads_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/threads"
)

// The reserve's threads exist after Reserve returns and are reused: the
// runtime keeps idle threads and takes them before it starts new ones. The
// runtime does not promise an exact count (it may start a thread of its own
// at any time), so reuse is checked against what no reuse would cost:
// five more reserves of half the threads would add more than twice as many
// again; they may add a few, not a quarter.
func TestReserveStartsThreadsThatStay(t *testing.T) {
	before := count(t)
	const extra = 20
	threads.Reserve(before + extra)
	after := count(t)
	if after < before+extra {
		t.Fatalf("%d threads after reserving %d (had %d)", after, before+extra, before)
	}
	for range 5 {
		threads.Reserve(after / 2)
	}
	if again := count(t); again-after >= after/4 {
		t.Fatalf("%d threads after reserving %d five more times, up from %d: the reserve was not reused", again, after/2, after)
	}
}

func count(t *testing.T) int {
	t.Helper()
	n, err := threads.Count()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The point of the reserve, as in a sandbox whose pids are used up: a
// child process moves itself into a pids cgroup whose limit is its own
// thread count, then blocks 12 goroutines in system calls at once. Without
// a reserve the runtime cannot start the threads they need and dies; with
// one it does not need to start any.
func TestReserveSurvivesPidsLimit(t *testing.T) {
	root := "/sys/fs/cgroup/pids" // cgroup v1, as on the machines here
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil || os.Getuid() != 0 {
		t.Skipf("needs root and the cgroup v1 pids controller at %s", root)
	}
	for _, tc := range []struct {
		reserve  int
		survives bool
	}{{0, false}, {24, true}} {
		t.Run(fmt.Sprintf("reserve %d", tc.reserve), func(t *testing.T) {
			dir := filepath.Join(root, fmt.Sprintf("boxwire-threads-test-%d-%d", os.Getpid(), tc.reserve))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Skipf("cannot make a pids cgroup: %v", err)
			}
			t.Cleanup(func() { removeCgroup(t, dir) })
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBlockedThreads$")
			cmd.Env = append(os.Environ(), "THREADS_HELPER_CGROUP="+dir, "THREADS_HELPER_RESERVE="+strconv.Itoa(tc.reserve))
			out, err := cmd.CombinedOutput()
			ok := err == nil && strings.Contains(string(out), "blocked work done")
			if ok != tc.survives {
				t.Fatalf("survived=%v, want %v: %v\n%s", ok, tc.survives, err, out)
			}
			// The runtime's words; with cgo (the race detector) pthread's.
			noThread := strings.Contains(string(out), "failed to create new OS thread") ||
				strings.Contains(string(out), "pthread_create failed: Resource temporarily unavailable")
			if !tc.survives && !noThread {
				t.Fatalf("died, but not for want of a thread: %v\n%s", err, out)
			}
		})
	}
}

// removeCgroup removes a cgroup once its processes are gone.
func removeCgroup(t *testing.T, dir string) {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := os.Remove(dir)
		if err == nil || os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("remove cgroup %s: %v", dir, err)
			return
		}
	}
}

// TestHelperBlockedThreads is the child of TestReserveSurvivesPidsLimit,
// not a test of its own.
func TestHelperBlockedThreads(t *testing.T) {
	dir := os.Getenv("THREADS_HELPER_CGROUP")
	if dir == "" {
		t.Skip("the child of TestReserveSurvivesPidsLimit")
	}
	reserve, _ := strconv.Atoi(os.Getenv("THREADS_HELPER_RESERVE"))
	threads.Reserve(reserve)
	n, err := threads.Count()
	if err != nil {
		t.Fatal(err)
	}
	write := func(file, v string) {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cgroup.procs", strconv.Itoa(os.Getpid()))
	write("pids.max", strconv.Itoa(n)) // every pid in use: no new thread
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			ts := syscall.NsecToTimespec(int64(300 * time.Millisecond))
			_ = syscall.Nanosleep(&ts, nil) // blocks its thread in the kernel
		})
	}
	wg.Wait()
	fmt.Println("blocked work done")
}
