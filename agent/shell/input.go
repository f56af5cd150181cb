package shell

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// sysRead is the syscall number of read(2) as /proc/PID/syscall shows it
// on the architectures the agent is built for (amd64 and arm64 use 0 and
// 63).
var sysRead = map[string]int64{"amd64": 0, "arm64": 63}

// AwaitingInput reports whether a process of the terminal's foreground
// process group is blocked reading from the terminal: the sign that a
// command waits for someone to type (a password prompt, a `read` from
// /dev/tty). It looks at the foreground group (tcgetpgrp on the master) and
// at each member's /proc/PID/syscall (a read on a descriptor that is this
// terminal) or, when that file cannot be read, /proc/PID/wchan. While the
// terminal still holds output the readers of Output have not been given
// (the prompt, say) it reports false. It does not block and is safe for
// concurrent use; it reports false once the process has been closed.
func (p *Process) AwaitingInput() bool {
	pgrp, err := p.foreground()
	if err != nil || pgrp <= 0 {
		return false
	}
	for _, pid := range groupMembers(pgrp) {
		if readingTTY(pid, p.ttyName) {
			// What the program wrote before it began to read (its
			// prompt) must have left the terminal for Output first.
			return !p.outputPending()
		}
	}
	return false
}

// outputPending reports whether the terminal holds output not yet read
// from the master. When it cannot tell (a kernel without TIOCINQ on the
// master) it reports false, as before the check existed.
func (p *Process) outputPending() bool {
	rc, err := p.master.SyscallConn()
	if err != nil {
		return false
	}
	n, ioctlErr := 0, error(nil)
	if err := rc.Control(func(fd uintptr) {
		n, ioctlErr = unix.IoctlGetInt(int(fd), unix.TIOCINQ)
	}); err != nil || ioctlErr != nil {
		return false
	}
	return n > 0
}

// TTY returns the name of the process's terminal, e.g. /dev/pts/3.
func (p *Process) TTY() string { return p.ttyName }

// foreground returns the terminal's foreground process group.
func (p *Process) foreground() (int, error) {
	rc, err := p.master.SyscallConn()
	if err != nil {
		return 0, err
	}
	var pgrp int
	var ioctlErr error
	if err := rc.Control(func(fd uintptr) {
		pgrp, ioctlErr = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP)
	}); err != nil {
		return 0, err
	}
	return pgrp, ioctlErr
}

// groupMembers lists the live processes whose process group is pgrp.
func groupMembers(pgrp int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name (which may hold spaces and
		// parentheses): state ppid pgrp ...
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgrp {
			pids = append(pids, pid)
		}
	}
	return pids
}

// readingTTY reports whether pid is blocked in read(2) on tty.
func readingTTY(pid int, tty string) bool {
	sc, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
	if err != nil {
		wchan, err := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
		return err == nil && strings.TrimSpace(string(wchan)) == "wait_woken"
	}
	f := strings.Fields(string(sc))
	if len(f) < 2 {
		return false // "running" or no syscall
	}
	nr, err := strconv.ParseInt(f[0], 10, 64)
	if want, ok := sysRead[runtime.GOARCH]; err != nil || !ok || nr != want {
		return false
	}
	fd, err := strconv.ParseInt(strings.TrimPrefix(f[1], "0x"), 16, 64)
	if err != nil {
		return false
	}
	target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
	if err != nil {
		return false
	}
	return target == tty || (tty == "" && strings.HasPrefix(target, "/dev/pts/")) ||
		filepath.Clean(target) == "/dev/tty"
}
