package terminal

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/vt"
)

// The emulator parses a few MB/s, slower than a PTY can write, so it is fed
// on a goroutine of its own from a backlog, and the PTY never waits for it.
// It parses only once the output has been quiet for quietFor, or when an
// attach needs the screen: during bulk output it would otherwise take the
// sandbox's CPU from the command and the stream. A backlog over maxBacklog
// (bulk output) is cut to its last keepTail bytes, from a line start, after
// a full reset: the screen then shows the end of the output, which is what a
// terminal would show, though modes set before the cut are lost. The same
// cut is made when parsing starts on a backlog over keepTail, so that the
// end of bulk output costs the sandbox a parse of keepTail bytes, not of
// maxBacklog.
const (
	maxBacklog = 2 << 20
	keepTail   = 256 << 10
	feedChunk  = 32 << 10
	quietFor   = 20 * time.Millisecond
)

// resetLine starts a cut backlog: a full reset, then a fresh line.
const resetLine = "\x1bc\r\n"

// screen is a session's terminal state. Its methods are safe for concurrent
// use; run feeds the emulator until close.
type screen struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending []byte
	written uint64 // stream bytes accepted by write (after cuts, as fed)
	fed     uint64 // stream bytes the emulator has parsed
	closed  bool
	last    time.Time // of the last write
	waiters int       // sync calls waiting for the emulator to catch up

	emuMu sync.Mutex
	emu   *vt.Emulator
}

// parserDataSize bounds what the emulator keeps of one OSC, DCS, APC, PM
// or SOS string (a window title, a hyperlink, OSC 52 clipboard data): the
// ansi package's own default. The screen draws none of what longer ones
// carry (images, big clipboard copies); their excess is dropped.
const parserDataSize = 64 << 10

func newScreen(cols, rows uint16) *screen {
	emu := vt.NewEmulator(int(cols), int(rows))
	emu.SetScrollbackSize(1) // no scrollback: its upkeep costs more than the parsing
	if shrinkParser(emu) {
		// vt's 4 MiB buffer is garbage now. Left to the collector, the
		// next allocation to reuse its pages zeroes them and makes them
		// resident, and the scavenger is slow to give them back (six
		// sessions: 12.7 MiB of anonymous memory instead of 6.6): return
		// it now, at the cost of a collection per session opened.
		debug.FreeOSMemory()
	}
	s := &screen{emu: emu}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// shrinkParser gives e's ANSI parser a string buffer of parserDataSize and
// reports whether it could. vt.NewEmulator (v0.1.0) gives every emulator a
// 4 MiB one and has no setter: a session then holds 4 MiB of heap until it
// is closed or reaped (an exited one too), which lets the collector leave
// 4 MiB more garbage per open session. The parser is an unexported field,
// reached with reflect; TestShrinkParser fails if a new version of vt moves
// it, and the emulator then keeps its own buffer. Call it before the first
// Write.
func shrinkParser(e *vt.Emulator) bool {
	f := reflect.ValueOf(e).Elem().FieldByName("parser")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*ansi.Parser]() {
		return false
	}
	p := *(**ansi.Parser)(unsafe.Pointer(f.UnsafeAddr()))
	if p == nil {
		return false
	}
	p.SetDataSize(parserDataSize)
	return true
}

// write queues p for the emulator without waiting for it.
func (s *screen) write(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, p...)
	s.written += uint64(len(p))
	s.last = time.Now()
	if len(s.pending) > maxBacklog {
		s.cut()
	}
	s.cond.Broadcast()
}

// cut keeps the backlog's last keepTail bytes, from a line start, after a
// full reset (resetLine). It cuts in place: the backlog keeps its array, so
// bulk output costs no allocation once it has grown. Called with mu held.
func (s *screen) cut() {
	tail := s.pending[len(s.pending)-keepTail:]
	if i := bytes.IndexByte(tail, '\n'); i >= 0 {
		tail = tail[i+1:]
	}
	old := len(s.pending)
	n := copy(s.pending, resetLine)
	n += copy(s.pending[n:], tail) // copy moves overlapping bytes correctly
	s.pending = s.pending[:n]
	s.written += uint64(n) - uint64(old)
}

// run feeds the emulator until close. It also drains the emulator's answers
// to terminal queries: the watchers' own terminals answer those.
func (s *screen) run(drainDone chan<- struct{}) {
	pipe := s.emu.InputPipe().(*io.PipeWriter)
	go func() {
		defer close(drainDone)
		_, _ = io.Copy(io.Discard, s.emu)
	}()
	defer pipe.Close()
	for {
		s.mu.Lock()
		for len(s.pending) == 0 && !s.closed {
			s.cond.Wait()
		}
		if len(s.pending) == 0 {
			s.mu.Unlock()
			return
		}
		if wait := quietFor - time.Since(s.last); wait > 0 && !s.closed && s.waiters == 0 {
			s.mu.Unlock()
			time.Sleep(wait)
			continue
		}
		if len(s.pending) > keepTail {
			s.cut() // bulk output: only its end can show
		}
		n := min(len(s.pending), feedChunk)
		chunk := append([]byte(nil), s.pending[:n]...)
		s.pending = s.pending[n:]
		if len(s.pending) == 0 {
			s.pending = nil
		}
		s.mu.Unlock()

		s.emuMu.Lock()
		_, _ = s.emu.Write(chunk)
		s.emuMu.Unlock()

		s.mu.Lock()
		s.fed += uint64(n)
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// sync waits until the emulator has parsed everything written so far (or
// the screen closed), then runs f with the emulator.
func (s *screen) sync(f func(e *vt.Emulator)) {
	s.mu.Lock()
	s.waiters++
	s.cond.Broadcast()
	for s.fed < s.written && !s.closed {
		s.cond.Wait()
	}
	s.waiters--
	s.mu.Unlock()
	s.emuMu.Lock()
	defer s.emuMu.Unlock()
	f(s.emu)
}

// close makes run return once the backlog is parsed.
func (s *screen) close() {
	s.mu.Lock()
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

// render draws the current screen (see renderEmulator).
func (s *screen) render() string {
	var out string
	s.sync(func(e *vt.Emulator) { out = renderEmulator(e) })
	return out
}

// renderEmulator draws the emulator's screen for a terminal of the same
// size: reset the style, enter or leave the alternate screen as the program
// has, clear, draw each line at its row, then place and show or hide the
// cursor. It asks nothing of the terminal it is sent to, so it cannot
// inject stale answers into the program's input.
func renderEmulator(e *vt.Emulator) string {
	var b strings.Builder
	b.WriteString("\x1b[0m")
	if e.IsAltScreen() {
		b.WriteString("\x1b[?1049h")
	} else {
		b.WriteString("\x1b[?1049l")
	}
	b.WriteString("\x1b[H\x1b[2J")
	for y, line := range strings.Split(e.Render(), "\n") {
		if y >= e.Height() {
			break
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		fmt.Fprintf(&b, "\x1b[%d;1H%s\x1b[0m", y+1, line)
	}
	pos := e.CursorPosition()
	fmt.Fprintf(&b, "\x1b[%d;%dH", pos.Y+1, pos.X+1)
	if e.CursorHidden() {
		b.WriteString("\x1b[?25l")
	} else {
		b.WriteString("\x1b[?25h")
	}
	return b.String()
}
