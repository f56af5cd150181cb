package shell

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"
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
	// Wake a read blocked with no deadline; the read loop then reads on
	// with drain deadlines of its own.
	_ = p.master.SetReadDeadline(time.Now())
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

// readLoop copies the PTY output to p.out. It ends on EIO (every holder of
// the terminal closed it), when the master is closed, or, once the main
// process has exited, after drainIdle without output or drainMax in all.
// Owned by Process; Wait and Close wait for it.
func (p *Process) readLoop() {
	defer close(p.readDone)
	buf := make([]byte, 32*1024)
	out := p.out
	var drainEnd time.Time // set once the main process has exited
	for {
		if drainEnd.IsZero() && p.hasExited() {
			drainEnd = time.Now().Add(drainMax)
		}
		if !drainEnd.IsZero() {
			_ = p.master.SetReadDeadline(minTime(time.Now().Add(drainIdle), drainEnd))
		}
		n, err := p.master.Read(buf)
		if n > 0 && out != nil {
			if _, werr := out.Write(buf[:n]); werr != nil {
				out = nil
			}
		}
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && drainEnd.IsZero() {
			// The waiter's wake-up deadline, set before we had seen the
			// exit: read again with a deadline of our own so no buffered
			// output is lost.
			continue
		}
		return // EIO, deadline while draining, or the master was closed
	}
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
