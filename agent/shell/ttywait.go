package shell

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// waitingOnTTY reports whether a thread of pid is blocked waiting to read
// from tty (see Process.AwaitingInput).
func waitingOnTTY(pid int, tty string) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, t := range tasks {
		if taskWaitingOnTTY(pid, t.Name(), tty) {
			return true
		}
	}
	return false
}

func taskWaitingOnTTY(pid int, tid, tty string) bool {
	sc, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/syscall", pid, tid))
	if err != nil {
		wchan, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/wchan", pid, tid))
		return err == nil && strings.TrimSpace(string(wchan)) == "wait_woken"
	}
	// "nr arg0 arg1 ... sp pc": nr in decimal, the rest in hex; "running"
	// or "-1 sp pc" when not in a system call.
	f := strings.Fields(string(sc))
	if len(f) < 4 {
		return false
	}
	nr, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return false
	}
	var args [3]uint64
	for i := range args {
		if args[i], err = strconv.ParseUint(strings.TrimPrefix(f[i+1], "0x"), 16, 64); err != nil {
			return false
		}
	}
	switch waitSyscalls[nr] {
	case waitRead:
		return isTTY(pid, int(args[0]), tty)
	case waitSelect:
		return selectOnTTY(pid, args[0], args[1], tty)
	case waitPoll:
		return pollOnTTY(pid, args[0], args[1], tty)
	case waitEpoll:
		return epollOnTTY(pid, int(args[0]), tty)
	}
	return false
}

// isTTY reports whether descriptor fd of pid is tty (or /dev/tty).
func isTTY(pid, fd int, tty string) bool {
	if fd < 0 {
		return false
	}
	target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
	if err != nil {
		return false
	}
	return target == tty || (tty == "" && strings.HasPrefix(target, "/dev/pts/")) ||
		filepath.Clean(target) == "/dev/tty"
}

// maxSelectFDs is FD_SETSIZE: select cannot wait on more.
const maxSelectFDs = 1024

// selectOnTTY reports whether a select(nfds, readfds, ...) waits to read
// tty. The read set is in the process's memory; when that cannot be read,
// a terminal descriptor below nfds counts (with a read set at all).
func selectOnTTY(pid int, nfds, readfds uint64, tty string) bool {
	if readfds == 0 || nfds == 0 {
		return false // a sleep, or a wait for writing only
	}
	nfds = min(nfds, maxSelectFDs)
	set, err := readMem(pid, readfds, int((nfds+63)/64*8))
	for fd := range int(nfds) {
		inSet := err != nil || set[fd/8]&(1<<(fd%8)) != 0
		if inSet && isTTY(pid, fd, tty) {
			return true
		}
	}
	return false
}

// maxPollFDs bounds how much of a poll array is looked at.
const maxPollFDs = 4096

// pollOnTTY reports whether a poll(fds, nfds, ...) waits to read tty. The
// array is in the process's memory; when that cannot be read, the
// terminal as standard input or on a descriptor of its own (a /dev/tty
// opened for a prompt: 3 and up) counts, not the standard output and error
// every command has.
func pollOnTTY(pid int, fds, nfds uint64, tty string) bool {
	if nfds == 0 || fds == 0 {
		return false
	}
	nfds = min(nfds, maxPollFDs)
	b, err := readMem(pid, fds, int(nfds*8))
	if err != nil {
		return pollFallback(pid, tty)
	}
	const pollIn = 0x1 // POLLIN
	for i := range int(nfds) {
		pfd := b[i*8 : i*8+8]
		fd := int32(binary.NativeEndian.Uint32(pfd))
		events := binary.NativeEndian.Uint16(pfd[4:])
		if events&pollIn != 0 && isTTY(pid, int(fd), tty) {
			return true
		}
	}
	return false
}

func pollFallback(pid int, tty string) bool {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err == nil && fd != 1 && fd != 2 && isTTY(pid, fd, tty) {
			return true
		}
	}
	return false
}

// epollOnTTY reports whether an epoll wait on epfd waits to read tty: the
// epoll set, listed in /proc/PID/fdinfo/EPFD as "tfd: N events: MASK ...",
// holds the terminal with EPOLLIN.
func epollOnTTY(pid, epfd int, tty string) bool {
	info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, epfd))
	if err != nil {
		return false
	}
	const epollIn = 0x1 // EPOLLIN
	for line := range strings.Lines(string(info)) {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "tfd:" || f[2] != "events:" {
			continue
		}
		fd, err1 := strconv.Atoi(f[1])
		events, err2 := strconv.ParseUint(f[3], 16, 32)
		if err1 == nil && err2 == nil && events&epollIn != 0 && isTTY(pid, fd, tty) {
			return true
		}
	}
	return false
}

// readMem reads n bytes at addr of pid's memory (allowed for the agent's
// own children).
func readMem(pid int, addr uint64, n int) ([]byte, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return nil, fmt.Errorf("read memory of %d: %w", pid, err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, int64(addr)); err != nil {
		return nil, fmt.Errorf("read memory of %d: %w", pid, err)
	}
	return b, nil
}
