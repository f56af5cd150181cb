package shell

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The ways a program can wait for its terminal, as /proc/PID/syscall
// numbers them on the architectures the agent is built for (arm64 has only
// the p- and epoll_pwait forms).
const (
	waitRead = iota + 1
	waitSelect
	waitPoll
	waitEpoll
)

var waitSyscalls = map[string]map[int64]int{
	"amd64": {0: waitRead, 23: waitSelect, 270: waitSelect, 7: waitPoll, 271: waitPoll,
		232: waitEpoll, 281: waitEpoll, 441: waitEpoll},
	"arm64": {63: waitRead, 72: waitSelect, 73: waitPoll, 22: waitEpoll, 441: waitEpoll},
}[runtime.GOARCH]

// AwaitingInput reports whether a process of the terminal's foreground
// process group is blocked waiting to read from the terminal: the sign that
// a command waits for someone to type (a password prompt, a `read` from
// /dev/tty, a Python select or a Node readline). It looks at the foreground
// group (tcgetpgrp on the master) and at each thread of each member: its
// /proc/PID/task/TID/syscall shows a read(2) on a descriptor that is this
// terminal, a select or poll whose descriptors include it for reading (read
// from /proc/PID/mem), or an epoll wait whose epoll set holds it for reading
// (/proc/PID/fdinfo). When the syscall file cannot be read it falls back to
// /proc/PID/wchan. A program that only sleeps, or waits on other files, is
// not awaiting input. While the
// terminal still holds output the readers of Output have not been given
// (the prompt, say) it reports false. It does not block and is safe for
// concurrent use; it reports false once the process has been closed.
func (p *Process) AwaitingInput() bool {
	pgrp, err := p.foreground()
	if err != nil || pgrp <= 0 {
		return false
	}
	for _, pid := range groupMembers(pgrp) {
		if waitingOnTTY(pid, p.ttyName) {
			// What the program wrote before it began to read (its
			// prompt) must have left the terminal for Output first.
			return !p.outputPending()
		}
	}
	return false
}

// outputPending reports whether the terminal holds output not yet read
// from the master. When it cannot tell (a kernel without TIOCINQ on the
// master) it reports false: the terminal counts as read.
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
