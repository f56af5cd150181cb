package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// StdinMode says what a process reads as standard input.
type StdinMode int

const (
	// StdinPTY connects stdin, stdout and stderr to the PTY: the process is
	// interactive and Write delivers its input.
	StdinPTY StdinMode = iota
	// StdinNull connects stdin to /dev/null; stdout and stderr stay on the
	// PTY, which is still the controlling terminal. Reads of stdin see EOF
	// at once, so a command cannot hang waiting for input.
	StdinNull
)

// Defaults used when the Spec leaves a field zero.
const (
	DefaultCols      = 80
	DefaultRows      = 24
	DefaultKillGrace = 2 * time.Second
)

// After the main process exits, output is still read until the PTY reports
// that every holder of the terminal has closed it (EIO), until the terminal
// is empty and no output came for drainIdle, or for drainMax once at least
// drainFloor bytes were read: a background child that keeps the terminal
// open cannot hold Wait hostage, and none of what the main process wrote is
// lost, however slow Output is. drainFloor is more than a terminal holds
// (64 KiB of the kernel's buffers plus the line discipline's 4 KiB).
const (
	drainIdle  = 200 * time.Millisecond
	drainMax   = 2 * time.Second
	drainFloor = 128 << 10
)

// ErrClosed is the cause Wait reports when Close stopped the process.
var ErrClosed = errors.New("process closed")

// Spec describes a process to start.
type Spec struct {
	// Command is the program and its arguments; Command[0] is looked up in
	// PATH as os/exec does.
	Command []string
	// Dir is the working directory; empty means the caller's.
	Dir string
	// Env is the environment as os/exec takes it; nil means the caller's.
	Env []string
	// Cols and Rows are the initial terminal size; zero means 80x24.
	Cols, Rows uint16
	// Stdin says whether the process is interactive (StdinPTY, the default)
	// or reads /dev/null (StdinNull).
	Stdin StdinMode
	// Output receives everything the process writes to the terminal, in
	// order, from a single goroutine. It must not retain the slice. Wait and
	// Close wait for the last Write to return, so Output must not block
	// indefinitely. If Write fails, later output is read and discarded.
	// Nil discards output.
	Output io.Writer
	// KillGrace is how long a stop waits after SIGTERM before SIGKILL;
	// zero means DefaultKillGrace.
	KillGrace time.Duration
	// ExtraFiles are passed to the process as file descriptors 3, 4, …
	// (as exec.Cmd.ExtraFiles); the caller keeps and closes its copies.
	ExtraFiles []*os.File
}

// Process is a command running on a PTY in its own session and process
// group. Its methods are safe for concurrent use. The caller must call Close
// once done with it, even after Wait returned, to release the PTY and kill
// whatever the command left behind in its process group.
type Process struct {
	cmd     *exec.Cmd
	pid     int
	master  *os.File
	ttyName string
	out     io.Writer
	grace   time.Duration

	exited   chan struct{} // closed once the main process is reaped
	waitDone chan struct{} // closed when the waiter goroutine is done
	readDone chan struct{} // closed when the read loop is done
	ctxDone  chan struct{} // closed when the context stop func returns
	stopCtx  func() bool

	exitCode int   // valid after exited is closed
	waitErr  error // valid after exited is closed

	mu        sync.Mutex
	stopCause error // why we stopped the process; nil if it ended on its own

	closeOnce sync.Once
	closeErr  error
}

// Start launches spec.Command on a new PTY. It returns once the process is
// running. When ctx ends, the process group is stopped as by Close (but the
// PTY stays open until Close) and Wait reports ctx's cause.
func Start(ctx context.Context, spec Spec) (*Process, error) {
	if len(spec.Command) == 0 {
		return nil, errors.New("start process: empty command")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Command[0], err)
	}
	cols, rows := orDefault(spec.Cols, DefaultCols), orDefault(spec.Rows, DefaultRows)
	master, tty, err := openPTY(cols, rows)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Command[0], err)
	}
	defer tty.Close() // the child has its own copy; ours must go for EIO to come

	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Dir, cmd.Env, cmd.ExtraFiles = spec.Dir, spec.Env, spec.ExtraFiles
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	ctty := 0
	if spec.Stdin == StdinNull {
		devNull, err := os.Open(os.DevNull)
		if err != nil {
			_ = master.Close()
			return nil, fmt.Errorf("start %s: %w", spec.Command[0], err)
		}
		defer devNull.Close()
		cmd.Stdin, ctty = devNull, 1 // the controlling terminal comes from stdout
	}
	pidfd := -1 // set by Start where the kernel supports it (pidfd.go)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: ctty, PidFD: &pidfd}
	if err := cmd.Start(); err != nil {
		_ = master.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Command[0], err)
	}

	p := &Process{
		cmd:      cmd,
		pid:      cmd.Process.Pid,
		master:   master,
		ttyName:  tty.Name(),
		out:      spec.Output,
		grace:    spec.KillGrace,
		exited:   make(chan struct{}),
		waitDone: make(chan struct{}),
		readDone: make(chan struct{}),
		ctxDone:  make(chan struct{}),
	}
	if p.grace <= 0 {
		p.grace = DefaultKillGrace
	}
	go p.waitLoop(pidfd)
	go p.readLoop()
	p.stopCtx = context.AfterFunc(ctx, func() {
		defer close(p.ctxDone)
		p.stop(context.Cause(ctx))
	})
	return p, nil
}

func orDefault(v, def uint16) uint16 {
	if v == 0 {
		return def
	}
	return v
}

// Pid returns the process id of the main process, which is also the id of
// its session and process group.
func (p *Process) Pid() int { return p.pid }

// Wait blocks until the main process has exited and its output has been
// drained (see Spec.Output), then returns its exit code: the exit status,
// or 128+n when signal n killed it, as shells report it. The error is nil
// when the process ended on its own, whatever its status; when Close or the
// Start context stopped it, the error wraps ErrClosed or the context's
// cause. Wait may be called any number of times.
func (p *Process) Wait() (exitCode int, err error) {
	<-p.waitDone
	<-p.readDone
	p.mu.Lock()
	cause := p.stopCause
	p.mu.Unlock()
	if cause != nil {
		return p.exitCode, fmt.Errorf("process %d stopped: %w", p.pid, cause)
	}
	return p.exitCode, p.waitErr
}

// Write sends input to the terminal, as typed keys. With StdinNull only
// programs that open /dev/tty themselves will read it. It may block while
// the terminal's input buffer is full.
func (p *Process) Write(b []byte) (int, error) {
	n, err := p.master.Write(b)
	if err != nil {
		return n, fmt.Errorf("write to process %d: %w", p.pid, err)
	}
	return n, nil
}

// Resize sets the terminal size; the process group receives SIGWINCH.
func (p *Process) Resize(cols, rows uint16) error {
	if err := setSize(p.master, cols, rows); err != nil {
		return fmt.Errorf("resize process %d: %w", p.pid, err)
	}
	return nil
}

// Signal sends sig to the whole process group. It returns an error wrapping
// os.ErrProcessDone when no process of the group is left.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := syscall.Kill(-p.pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			err = os.ErrProcessDone
		}
		return fmt.Errorf("signal process group %d: %w", p.pid, err)
	}
	return nil
}
