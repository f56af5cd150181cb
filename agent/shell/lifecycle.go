package shell

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// waitLoop reaps the main process — once its pidfd says it exited, so no
// OS thread waits for it (pidfd.go) — and then bounds the output drain by
// setting a read deadline on the master. It owns pidfd. Owned by Process;
// Wait and Close wait for it.
func (p *Process) waitLoop(pidfd int) {
	defer close(p.waitDone)
	awaitExit(pidfd) // when it cannot, Wait blocks a thread as usual
	err := p.cmd.Wait()
	p.exitCode = exitCode(p.cmd.ProcessState)
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		p.waitErr = err
	}
	close(p.exited)
	testEvent("exited")
	// Wake a read blocked with no deadline; the read loop then reads on
	// with drain deadlines of its own.
	_ = p.master.SetReadDeadline(time.Now())
	testEvent("woke")
}

// testHook, when set (only by tests, through export_test.go), is called
// at fixed points of the waiter and the reader so a test can force the
// interleavings the scheduler produces under load.
var testHook atomic.Pointer[func(event string)]

func testEvent(event string) {
	if h := testHook.Load(); h != nil {
		(*h)(event)
	}
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// readSize bounds one Write of output (readLoop): 64 KiB, as much as a
// terminal frame carries.
const readSize = 64 << 10

// readLoop copies the PTY output to p.out, each Write what one read and
// the reads right after it that need not wait gave (up to readSize). It
// ends on EIO (every holder of the terminal closed it) given twice with
// nothing read between (the first can come before the last output), when
// the master is closed, or, once the main process has exited, when the
// terminal is empty
// and no output came for drainIdle, or after drainMax once at least
// drainFloor bytes were read since the exit. A read deadline never ends it
// by itself: the deadline may be the waiter's wake-up, set after ours, so
// what the terminal still holds is read without one first. Owned by
// Process; Wait and Close wait for it.
func (p *Process) readLoop() {
	defer close(p.readDone)
	buf := make([]byte, readSize)
	out := p.out
	var drainEnd, idleEnd time.Time // set once the main process has exited
	var drained int                 // bytes read since then
	var closedOnce bool             // the last read answered EIO, and none has given output since
	for {
		if drainEnd.IsZero() && p.hasExited() {
			drainEnd = time.Now().Add(drainMax)
		}
		if !drainEnd.IsZero() {
			idleEnd = minTime(time.Now().Add(drainIdle), drainEnd)
			_ = p.master.SetReadDeadline(idleEnd)
			testEvent("armed")
		}
		n, err := p.master.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			n, err = p.readHeld(buf)
		}
		// A PTY read gives at most the line discipline's 4 KiB: gather
		// what the terminal holds already into one Write, without waiting
		// for more, so that bulk output reaches Output in large pieces
		// (a terminal stream sends each Write as a frame).
		for err == nil && n > 0 && n < len(buf) {
			k, herr := p.readHeld(buf[n:])
			n += k
			if herr != nil || k == 0 {
				err = herr
				break
			}
		}
		if n > 0 && out != nil {
			if _, werr := out.Write(buf[:n]); werr != nil {
				out = nil
			}
		}
		if n > 0 {
			closedOnce = false
		}
		if err != nil {
			if errors.Is(err, syscall.EIO) && !closedOnce {
				// Every holder of the terminal closed it, but the kernel
				// can say so while the last writer's output is still on
				// its way in: its write queued the move into the
				// terminal, and the close landed between a read's flush
				// of that work and its look at the flag. The next read
				// flushes it; EIO again, with nothing read, is the end.
				closedOnce = true
				continue
			}
			return // EIO confirmed, or the master was closed
		}
		if drainEnd.IsZero() {
			continue
		}
		drained += n
		now := time.Now()
		if n > 0 && (now.Before(drainEnd) || drained < drainFloor) {
			continue
		}
		if n == 0 && now.Before(idleEnd) {
			continue // the waiter's wake-up, not our deadline
		}
		return // idle with the terminal empty, or past the limits
	}
}

// readHeld reads what the terminal holds now, without waiting and whatever
// the read deadline says; n is 0 and err nil when it holds nothing. The
// kernel moves output still in flight into the terminal before it answers,
// so "nothing" means nothing was written that has not been read.
func (p *Process) readHeld(buf []byte) (int, error) {
	rc, err := p.master.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("read pty: %w", err)
	}
	n, rerr := 0, error(nil)
	if err := rc.Control(func(fd uintptr) {
		for {
			n, rerr = unix.Read(int(fd), buf)
			if !errors.Is(rerr, unix.EINTR) {
				return
			}
		}
	}); err != nil {
		return 0, fmt.Errorf("read pty: %w", err)
	}
	switch {
	case errors.Is(rerr, unix.EAGAIN):
		return 0, nil
	case rerr != nil:
		return 0, fmt.Errorf("read pty: %w", rerr)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (p *Process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// stop tears the process group down: if the main process is still running,
// SIGHUP and SIGTERM to the group, then up to the grace period for it to
// exit; then SIGKILL to the group in any case, which also removes anything
// the command left behind. It blocks until the main process is reaped.
func (p *Process) stop(cause error) {
	if !p.hasExited() {
		p.mu.Lock()
		if p.stopCause == nil {
			p.stopCause = cause
		}
		p.mu.Unlock()
		_ = syscall.Kill(-p.pid, syscall.SIGHUP)
		_ = syscall.Kill(-p.pid, syscall.SIGTERM)
		t := time.NewTimer(p.grace)
		select {
		case <-p.exited:
		case <-t.C:
		}
		t.Stop()
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	<-p.exited
}

// Close stops the process group (see Spec.KillGrace), waits for the output
// to drain and closes the PTY. It blocks for at most the grace period plus
// the drain limits, provided Spec.Output does not block. Close is
// idempotent; every call returns the first call's result.
func (p *Process) Close() error {
	p.closeOnce.Do(func() {
		if !p.stopCtx() {
			<-p.ctxDone // the context fired: let its stop finish
		}
		p.stop(ErrClosed)
		<-p.waitDone
		<-p.readDone
		p.closeErr = p.master.Close()
	})
	return p.closeErr
}
