package shell

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// A goroutine in exec.Cmd.Wait holds an OS thread blocked in the kernel
// for as long as the command runs. Threads count against the sandbox's
// pids limit, and the agent keeps a fixed reserve of them (agent/threads),
// so a process is awaited in the runtime's poller instead: its pidfd
// becomes readable when it exits, and only then does Wait run, at once.

// awaitExit blocks until the process behind pidfd has exited, without
// reaping it and without holding an OS thread. It closes pidfd. It reports
// false when the poller cannot watch a pidfd (an old kernel, a sandbox
// runtime without pidfd polling) or pidfd is -1; the caller then waits the
// usual way.
func awaitExit(pidfd int) bool {
	if pidfd < 0 {
		return false
	}
	if err := unix.SetNonblock(pidfd, true); err != nil {
		_ = unix.Close(pidfd)
		return false
	}
	f := os.NewFile(uintptr(pidfd), "pidfd") // non-blocking: in the poller
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	exited := false
	err = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0) // does not block
		if errors.Is(err, unix.EINTR) {
			return false // wait for readiness and look again
		}
		exited = err == nil && n > 0
		return exited || err != nil
	})
	return err == nil && exited
}
