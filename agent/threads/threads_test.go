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

// The reserve's threads exist after Reserve returns and stay: the runtime
// keeps idle threads and reuses them.
func TestReserveStartsThreadsThatStay(t *testing.T) {
	before, err := threads.Count()
	if err != nil {
		t.Fatal(err)
	}
	threads.Reserve(before + 20)
	after, err := threads.Count()
	if err != nil {
		t.Fatal(err)
	}
	if after < before+20 {
		t.Fatalf("%d threads after reserving %d (had %d)", after, before+20, before)
	}
	for range 5 {
		threads.Reserve(4)
	}
	if again, _ := threads.Count(); again != after {
		t.Fatalf("%d threads after reserving again, want the same %d", again, after)
	}
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
