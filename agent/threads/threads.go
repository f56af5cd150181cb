// Package threads keeps a reserve of OS threads for the agent.
//
// The Go runtime starts an OS thread whenever a goroutine blocks in a
// system call (a file read, a fork) and no idle thread is left. Inside a
// sandbox, threads count against the container's pids limit like
// processes, and a command that uses up that limit (a fork bomb, a build
// with too many workers) would make the runtime's next thread start fail —
// and the runtime treats that as fatal ("failed to create new OS thread"):
// the agent would die with the command. So the agent starts its threads
// while it can: the runtime never destroys an idle thread, and reuses them
// before it starts new ones. Reserve makes the threads; the rest of the
// agent keeps the number of goroutines blocked in system calls at once
// below it (commands are awaited in the poller, file tools are gated).
package threads

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// Reserve makes the runtime start n OS threads now, which then wait idle
// until it needs them. It returns once they exist. Each costs a few tens of
// KiB and one pid of the sandbox's limit.
//
// How: n goroutines each lock themselves to an OS thread (a goroutine
// locked to its thread that blocks takes the thread with it, so the others
// need threads of their own) and wait; when all n are in place they unlock
// and return, leaving their threads idle in the runtime's pool.
func Reserve(n int) {
	var ready, done sync.WaitGroup
	release := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for range n {
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			ready.Done()
			<-release
			runtime.UnlockOSThread() // unlocked: the thread outlives the goroutine
		}()
	}
	ready.Wait()
	close(release)
	done.Wait()
}

// Count returns how many OS threads the process has, from
// /proc/self/status.
func Count() (int, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("count threads: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return 0, fmt.Errorf("count threads: %q: %w", line, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("count threads: no Threads line in /proc/self/status")
}
