package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// clearLine is what the editor is fed on Ctrl-C at the prompt: ^E (end of
// line) then ^U (erase to its start).
const clearLine = "\x05\x15"

// editor is the interactive line editor on a terminal: a lineEditor
// (lineedit.go: arrows, Home/End, ^A ^E ^K ^U ^W, history with Up/Down,
// all by display columns) over the input terminal in a mode that keeps
// signals (Ctrl-C still sends SIGINT) and output processing. It owns two goroutines: the key pump
// (reads the terminal, stoppable through a pipe) and the line reader (runs
// ReadLine each time the chat asks for a line); Close stops and waits for
// both, and restores the terminal.
//
// All output meant for the terminal goes through Write: while a line is
// being edited, complete lines are written above the prompt (which is
// redrawn) and a partial line is held until it ends.
type editor struct {
	in, out *os.File
	saved   *unix.Termios
	mode    unix.Termios  // the editing mode
	pumping chan struct{} // closed when the running pump returns
	t       *lineEditor
	hist    *history

	keys  chan []byte   // chunks read from the terminal, or injected
	eof   chan struct{} // closed when the terminal reached EOF
	ask   chan struct{} // the chat wants one line
	lines chan string   // lines read; closed at EOF (Ctrl-D on an empty line)
	quit  chan struct{}
	wake  [2]int // pipe: a byte on wake[1] stops the key pump
	wg    sync.WaitGroup
	once  sync.Once
	rest  []byte // the part of a chunk ReadLine has not read yet

	mu      sync.Mutex
	reading bool   // ReadLine runs: the prompt is on the screen
	held    []byte // output of a partial line held while reading
}

// newEditor puts the terminal in into line-editing mode and starts the
// editor; historyPath, if set, keeps the history across runs.
func newEditor(in, out *os.File, prompt, historyPath string) (*editor, error) {
	fd := int(in.Fd())
	saved, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("line editor: %w", err)
	}
	mode := *saved
	mode.Lflag &^= unix.ICANON | unix.ECHO | unix.IEXTEN
	mode.Iflag &^= unix.ICRNL | unix.INLCR | unix.IGNCR
	mode.Cc[unix.VMIN], mode.Cc[unix.VTIME] = 1, 0
	e := &editor{in: in, out: out, saved: saved, mode: mode, hist: loadHistory(historyPath),
		keys: make(chan []byte, 64), eof: make(chan struct{}), ask: make(chan struct{}),
		lines: make(chan string), quit: make(chan struct{})}
	if err := unix.Pipe2(e.wake[:], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("line editor: %w", err)
	}
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &mode); err != nil {
		unix.Close(e.wake[0])
		unix.Close(e.wake[1])
		return nil, fmt.Errorf("line editor: %w", err)
	}
	e.t = newLineEditor(editorIO{e}, prompt, e.hist)
	e.startPump()
	e.wg.Go(e.readLines)
	return e, nil
}

// Close stops the editor, waits for its goroutines and restores the
// terminal. It is idempotent.
func (e *editor) Close() error {
	var err error
	e.once.Do(func() {
		close(e.quit)
		_, _ = unix.Write(e.wake[1], []byte{0})
		e.wg.Wait()
		err = unix.IoctlSetTermios(int(e.in.Fd()), unix.TCSETS, e.saved)
		unix.Close(e.wake[0])
		unix.Close(e.wake[1])
	})
	return err
}

// Suspend gives the terminal back (for /shell): it stops reading it and
// restores its mode. Resume undoes it. Call them from one goroutine, with
// no line asked for.
func (e *editor) Suspend() error {
	_, _ = unix.Write(e.wake[1], []byte{0})
	<-e.pumping
	return unix.IoctlSetTermios(int(e.in.Fd()), unix.TCSETS, e.saved)
}

// Resume takes the terminal again after Suspend.
func (e *editor) Resume() error {
	err := unix.IoctlSetTermios(int(e.in.Fd()), unix.TCSETS, &e.mode)
	e.startPump()
	return err
}

func (e *editor) startPump() {
	done := make(chan struct{})
	e.pumping = done
	e.wg.Go(func() {
		defer close(done)
		e.pump()
	})
}

// Ask shows the prompt and reads one line, which arrives on Lines. Call it
// again only after that line arrived.
func (e *editor) Ask() {
	if w, h, err := term.GetSize(int(e.out.Fd())); err == nil {
		_ = e.t.SetSize(w, h)
	}
	select {
	case e.ask <- struct{}{}:
	case <-e.quit:
	}
}

// Lines delivers the lines asked for; it is closed at EOF.
func (e *editor) Lines() <-chan string { return e.lines }

// ClearLine erases the line being edited (Ctrl-C at the prompt).
func (e *editor) ClearLine() {
	select {
	case e.keys <- []byte(clearLine):
	case <-e.quit:
	}
}

// Width is the terminal's width in columns (0 when unknown).
func (e *editor) Width() int {
	w, _, err := term.GetSize(int(e.out.Fd()))
	if err != nil {
		return 0
	}
	return w
}

// Write writes output for the terminal; see editor. It is safe for
// concurrent use with the editor's goroutines.
func (e *editor) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.reading {
		return e.t.Write(p)
	}
	e.held = append(e.held, p...)
	i := lastNewline(e.held)
	if i < 0 {
		return len(p), nil
	}
	_, err := e.t.Write(e.held[:i+1])
	e.held = append(e.held[:0], e.held[i+1:]...)
	return len(p), err
}

// readLines runs ReadLine for each Ask until EOF or Close.
func (e *editor) readLines() {
	defer close(e.lines)
	for {
		select {
		case <-e.ask:
		case <-e.quit:
			return
		}
		e.setReading(true)
		line, err := e.t.ReadLine()
		e.setReading(false)
		if err != nil {
			_, _ = e.t.Write([]byte("\n"))
			return
		}
		select {
		case e.lines <- line:
		case <-e.quit:
			return
		}
	}
}

// setReading marks whether the prompt is up; when it goes away the held
// partial line is written.
func (e *editor) setReading(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reading = on
	if !on && len(e.held) > 0 {
		_, _ = e.t.Write(e.held)
		e.held = e.held[:0]
	}
}

// pump reads the terminal into keys until EOF, an error or Close.
func (e *editor) pump() {
	buf := make([]byte, 1024)
	fds := []unix.PollFd{{Fd: int32(e.in.Fd()), Events: unix.POLLIN}, {Fd: int32(e.wake[0]), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			close(e.eof)
			return
		}
		if fds[1].Revents != 0 {
			_, _ = unix.Read(e.wake[0], buf[:1])
			return
		}
		if fds[0].Revents == 0 {
			continue
		}
		n, err := unix.Read(int(e.in.Fd()), buf)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if n <= 0 || err != nil {
			close(e.eof)
			return
		}
		select {
		case e.keys <- append([]byte(nil), buf[:n]...):
		case <-e.quit:
			return
		}
	}
}

// editorIO is the lineEditor's side of the editor: keys in, the terminal
// out.
type editorIO struct{ e *editor }

// Read gives the lineEditor the next keys; io.EOF at the terminal's EOF or
// when the editor closes.
func (x editorIO) Read(p []byte) (int, error) {
	e := x.e
	if len(e.rest) == 0 {
		select {
		case b := <-e.keys:
			e.rest = b
		case <-e.eof:
			return 0, io.EOF
		case <-e.quit:
			return 0, io.EOF
		}
	}
	n := copy(p, e.rest)
	e.rest = e.rest[n:]
	return n, nil
}

func (x editorIO) Write(p []byte) (int, error) { return x.e.out.Write(p) }

func lastNewline(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			return i
		}
	}
	return -1
}
