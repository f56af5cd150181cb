package terminal

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/charmbracelet/x/vt"

	"github.com/boxwire/boxwire/agent/shell"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Sink is one watcher of sessions: a connection. Its methods must not
// block; Send and Offer are called with the session's output lock held, so
// what a Sink receives is in order.
type Sink interface {
	// Send queues a control message (attached, detached, exit) for the
	// peer, after everything queued before it. It must not drop it silently:
	// a Sink that cannot queue it ends its connection.
	Send(env wire.Envelope)
	// Offer (wire.Target) queues one encoded output frame
	// (wire.AppendFrame), unless the peer's terminal buffer is full; it
	// reports whether it queued it. The Sink may keep frame. While Offer
	// refuses, the session waits for a Waker given to Watch: the Sink wakes
	// it when it may have room again (its writer took something, or its
	// connection ended), until Unwatch.
	wire.Target
}

// ErrExited is returned for input to a session whose process has ended.
var ErrExited = errors.New("terminal session has exited")

// Session is one terminal: a process on a PTY, the screen it drew, and the
// Sinks watching it. Its methods are safe for concurrent use.
type Session struct {
	id      string
	r       *Registry
	command []string
	proc    *shell.Process

	// outMu serializes output fan-out, attach, resize and exit, so that an
	// attach's screen and the frames after it fit together exactly.
	outMu sync.Mutex
	scr   *screen
	fan   wire.Fanout[Sink] // used under outMu
	// targets is fanout's buffer, kept between frames; under outMu.
	targets []Sink

	mu       sync.Mutex
	sinks    map[Sink]struct{} // written under outMu and mu
	cols     uint16
	rows     uint16
	exited   bool
	exitCode int
	active   time.Time // last input, output or watcher change
	closing  bool
	done     chan struct{} // closed when the process has exited and watchers were told
	drained  chan struct{} // closed when the emulator's answer pipe is drained
	closeErr error
}

// output is the PTY's writer: it feeds the emulator and the watchers.
type output struct{ s *Session }

func (o output) Write(p []byte) (int, error) {
	o.s.publish(p)
	return len(p), nil
}

// publish runs on the PTY read goroutine: it updates the screen and offers
// p to every watcher, waiting while all of them are full (see fanout).
func (s *Session) publish(p []byte) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.scr.write(p)
	s.touch()
	s.mu.Lock()
	n := len(s.sinks)
	s.mu.Unlock()
	if n == 0 {
		return
	}
	for len(p) > 0 {
		chunk := p[:min(len(p), wire.MaxFrameData)]
		p = p[len(chunk):]
		frame, _ := wire.AppendFrame(make([]byte, 0, wire.FrameHeaderLen(s.id)+len(chunk)), wire.FrameOutput, s.id, chunk)
		s.fanout(frame)
	}
}

// fanout offers frame to every watcher, waiting while some are full (see
// wire.Fanout): one that is still full lagGrace after another watcher took
// the frame, or StallLimit after the first try, is detached as too slow.
// Called with outMu held.
func (s *Session) fanout(frame []byte) {
	pending := s.targets[:0]
	s.mu.Lock()
	for k := range s.sinks {
		pending = append(pending, k)
	}
	s.mu.Unlock()
	s.targets = pending[:0]
	for _, k := range s.fan.Deliver(s.r.ctx.Done(), pending, frame) {
		s.r.log.Warn("terminal watcher too slow; detached", "session", s.id)
		s.removeSink(k)
		k.Send(wire.MustNew(wire.TypeTerminalDetached, "", "", wire.TerminalDetached{Session: s.id, Reason: wire.DetachTooSlow}))
	}
	clear(pending[:cap(pending)]) // the buffer holds no watcher for the GC
}

func (s *Session) touch() {
	s.mu.Lock()
	s.active = time.Now()
	s.mu.Unlock()
}

func (s *Session) removeSink(k Sink) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.sinks[k]
	delete(s.sinks, k)
	s.active = time.Now()
	return ok
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// Info describes the session now.
func (s *Session) Info() wire.TerminalInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.infoLocked()
}

func (s *Session) infoLocked() wire.TerminalInfo {
	info := wire.TerminalInfo{Session: s.id, Command: s.command, Cols: s.cols, Rows: s.rows, Watchers: len(s.sinks), Exited: s.exited}
	if s.exited {
		code := s.exitCode
		info.ExitCode = &code
	}
	return info
}

// Attach makes k a watcher: it sends k the terminal_attached answer (with
// id, the request's id) holding a fresh rendering of the screen, then live
// output follows in frames. Attaching a session that has exited sends its
// last screen and terminal_exit. Attaching twice is allowed: k gets a fresh
// screen again. Attach may wait while output is being fanned out.
func (s *Session) Attach(k Sink, id string) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.attachLocked(k, id)
}

// attachLocked is Attach with outMu held.
func (s *Session) attachLocked(k Sink, id string) {
	s.mu.Lock()
	if !s.exited {
		s.sinks[k] = struct{}{}
	}
	s.active = time.Now()
	info := s.infoLocked()
	s.mu.Unlock()
	k.Send(wire.MustNew(wire.TypeTerminalAttached, "", id, wire.TerminalAttached{TerminalInfo: info, Screen: s.scr.render()}))
	if info.Exited {
		k.Send(wire.MustNew(wire.TypeTerminalExit, "", "", wire.TerminalExit{Session: s.id, ExitCode: *info.ExitCode}))
	}
}

// Detach stops sending output to k and reports whether k was watching.
// The session goes on.
func (s *Session) Detach(k Sink) bool {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	return s.removeSink(k)
}

// Write types data into the terminal. It may block while the terminal's
// input buffer is full (the program does not read).
func (s *Session) Write(data []byte) error {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	if exited {
		return ErrExited
	}
	s.touch()
	_, err := s.proc.Write(data)
	return err
}

// Resize sets the window size of the PTY (the program gets SIGWINCH) and of
// the screen the session keeps.
func (s *Session) Resize(cols, rows uint16) error {
	if cols == 0 || rows == 0 {
		return fmt.Errorf("resize %s: size %dx%d", s.id, cols, rows)
	}
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.mu.Lock()
	if s.exited {
		s.mu.Unlock()
		return ErrExited
	}
	s.cols, s.rows = cols, rows
	s.mu.Unlock()
	if err := s.proc.Resize(cols, rows); err != nil {
		return err
	}
	s.scr.sync(func(e *vt.Emulator) { e.Resize(int(cols), int(rows)) })
	return nil
}

// signals are the names terminal_signal accepts.
var signals = map[string]syscall.Signal{
	"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "HUP": syscall.SIGHUP, "KILL": syscall.SIGKILL,
	"QUIT": syscall.SIGQUIT, "TSTP": syscall.SIGTSTP, "CONT": syscall.SIGCONT,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "WINCH": syscall.SIGWINCH,
}

// Signal sends the named signal (INT, TERM, …, without SIG) to the
// session's process group.
func (s *Session) Signal(name string) error {
	sig, ok := signals[name]
	if !ok {
		return fmt.Errorf("signal %s: unknown signal %q", s.id, name)
	}
	return s.proc.Signal(sig)
}

// wait runs on a goroutine owned by the Registry: when the process has
// exited and its output is drained, it tells every watcher.
func (s *Session) wait() {
	defer s.r.wg.Done()
	code, _ := s.proc.Wait()
	s.outMu.Lock()
	s.mu.Lock()
	s.exited, s.exitCode, s.active = true, code, time.Now()
	sinks := s.sinks
	s.sinks = map[Sink]struct{}{}
	s.mu.Unlock()
	for k := range sinks {
		k.Send(wire.MustNew(wire.TypeTerminalExit, "", "", wire.TerminalExit{Session: s.id, ExitCode: code}))
	}
	s.outMu.Unlock()
	s.r.log.Info("terminal exited", "session", s.id, "exit_code", code)
	close(s.done)
}

// close stops the process group, waits until watchers were told of the
// exit, releases the PTY and the emulator, and removes the session from
// the registry. It blocks for at most the kill grace period plus the
// output drain; it is idempotent.
func (s *Session) close() error {
	s.mu.Lock()
	first := !s.closing
	s.closing = true
	s.mu.Unlock()
	if first {
		s.closeErr = s.proc.Close()
		<-s.done
		s.scr.close()
		<-s.drained
		s.r.remove(s)
	}
	<-s.drained
	return s.closeErr
}
