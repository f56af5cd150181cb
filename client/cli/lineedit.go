package cli

import (
	"bytes"
	"cmp"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/clipperhouse/displaywidth"
)

// maxEditLine is the longest line the editor takes, in runes; typing
// beyond it is dropped.
const maxEditLine = 4096

// lineHistory is the editor's history: At(0) is the newest entry.
type lineHistory interface {
	Add(entry string)
	Len() int
	At(idx int) string
}

// lineEditor edits one line at a time on a terminal, by display columns:
// the cursor moves, and the line wraps, by grapheme clusters of
// displaywidth's width (a CJK character or an emoji takes two columns, a
// combining mark none and moves with its base). Every change redraws the
// prompt and the line. ReadLine reads keys from rw; Write puts output
// above the line being edited. Safe for concurrent use; one ReadLine at
// a time.
type lineEditor struct {
	rw     io.ReadWriter
	prompt string
	hist   lineHistory // may be nil

	mu      sync.Mutex
	width   int    // terminal columns; 0: unknown (no wrapping)
	line    string // the line being edited
	pos     int    // the cursor: a byte offset at a grapheme boundary
	row     int    // the terminal row of the cursor, from the prompt's row
	reading bool   // the prompt and line are on the screen
	histIdx int    // the history entry shown; -1: the line being typed
	typed   string // the line being typed, kept while history is shown
	rest    []byte // keys read but not played yet
	out     bytes.Buffer
}

func newLineEditor(rw io.ReadWriter, prompt string, hist lineHistory) *lineEditor {
	return &lineEditor{rw: rw, prompt: prompt, hist: hist, histIdx: -1}
}

// SetSize sets the terminal's width in columns (0: unknown).
func (l *lineEditor) SetSize(width, _ int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.width = max(width, 0)
	return nil
}

// ReadLine shows the prompt and edits a line until Enter, which returns
// it (and adds it to the history), or Ctrl-D on an empty line, which
// returns io.EOF. Keys read after Enter are kept for the next call. It
// blocks reading rw; a read or write error is returned.
func (l *lineEditor) ReadLine() (string, error) {
	l.mu.Lock()
	l.line, l.pos, l.histIdx, l.reading = "", 0, -1, true
	l.draw(false)
	line, done, eof := l.keys() // keys left from the last read
	err := l.flush()
	l.mu.Unlock()
	var buf [1024]byte
	for !done && !eof && err == nil {
		n, rerr := l.rw.Read(buf[:])
		l.mu.Lock()
		l.rest = append(l.rest, buf[:n]...)
		line, done, eof = l.keys()
		err = cmp.Or(l.flush(), rerr)
		l.mu.Unlock()
	}
	switch {
	case done:
		if l.hist != nil {
			l.hist.Add(line)
		}
		return line, nil
	case eof:
		return "", io.EOF
	}
	l.mu.Lock()
	l.reading = false
	l.mu.Unlock()
	return "", err
}

// keys plays the complete keys read (l.rest) and leaves the start of a
// key cut by the read there; done says Enter ended the line, eof that
// Ctrl-D did.
func (l *lineEditor) keys() (line string, done, eof bool) {
	var typed []rune // printable runes, inserted together
	played := false
	defer func() {
		if len(typed) > 0 {
			l.insert(string(typed))
		}
		if played && !done && !eof {
			l.draw(true)
		}
	}()
	for {
		k, r, rest, ok := nextKey(l.rest)
		if !ok {
			return "", false, false
		}
		l.rest, played = rest, true
		if k == keyRune {
			typed = append(typed, r)
			continue
		}
		if len(typed) > 0 {
			l.insert(string(typed))
			typed = typed[:0]
		}
		switch {
		case k == keyEnter:
			line, l.pos = l.line, len(l.line)
			l.draw(true)
			if _, col := l.place(l.pos); col > 0 {
				l.out.WriteString("\r\n")
			}
			l.reading, l.row = false, 0
			return line, true, false
		case k == keyCtrlD && l.line == "":
			l.reading, l.row = false, 0
			return "", false, true
		}
		l.edit(k)
	}
}

// edit applies one editing key to the line.
func (l *lineEditor) edit(k key) {
	switch k {
	case keyBackspace:
		l.cut(l.prevBoundary(l.pos), l.pos)
	case keyDelete, keyCtrlD:
		l.cut(l.pos, l.nextBoundary(l.pos))
	case keyLeft:
		l.pos = l.prevBoundary(l.pos)
	case keyRight:
		l.pos = l.nextBoundary(l.pos)
	case keyHome:
		l.pos = 0
	case keyEnd:
		l.pos = len(l.line)
	case keyWordLeft:
		l.pos = l.wordLeft()
	case keyWordRight:
		l.pos = l.wordRight()
	case keyKillEnd:
		l.cut(l.pos, len(l.line))
	case keyKillStart:
		l.cut(0, l.pos)
	case keyKillWord:
		l.cut(l.wordLeft(), l.pos)
	case keyUp:
		l.showHistory(l.histIdx + 1)
	case keyDown:
		l.showHistory(l.histIdx - 1)
	case keyClearScreen:
		l.out.WriteString("\x1b[2J\x1b[H")
		l.row = 0
	}
}

// insert puts s at the cursor, up to maxEditLine runes in all.
func (l *lineEditor) insert(s string) {
	room := maxEditLine - utf8.RuneCountInString(l.line)
	if n := utf8.RuneCountInString(s); n > room {
		s = string([]rune(s)[:max(room, 0)])
	}
	l.line = l.line[:l.pos] + s + l.line[l.pos:]
	l.pos = l.boundaryFrom(l.pos + len(s))
}

// cut removes the bytes from i to j and leaves the cursor at i.
func (l *lineEditor) cut(i, j int) {
	l.line = l.line[:i] + l.line[j:]
	l.pos = i
}

// showHistory shows history entry idx (-1: the line being typed), if
// there is one.
func (l *lineEditor) showHistory(idx int) {
	if l.hist == nil || idx < -1 || idx >= l.hist.Len() {
		return
	}
	if l.histIdx == -1 {
		l.typed = l.line
	}
	l.histIdx = idx
	l.line = l.typed
	if idx >= 0 {
		l.line = l.hist.At(idx)
	}
	l.pos = len(l.line)
}

// Write writes p for the terminal (newlines as CR LF). While a line is
// being edited, the prompt and line are erased first and drawn again
// below p; p should then end with a newline.
func (l *lineEditor) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reading {
		l.erase()
	}
	l.out.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n")))
	if l.reading {
		l.draw(false)
	}
	if err := l.flush(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// flush writes the queued output.
func (l *lineEditor) flush() error {
	if l.out.Len() == 0 {
		return nil
	}
	_, err := l.rw.Write(l.out.Bytes())
	l.out.Reset()
	return err
}

// erase queues moving to the prompt's start and clearing to the screen's
// end.
func (l *lineEditor) erase() {
	l.out.WriteString("\r")
	moveRows(&l.out, -l.row)
	l.out.WriteString("\x1b[J")
	l.row = 0
}

// draw queues drawing the prompt and line (after erasing the old ones when
// redraw) and putting the cursor at l.pos.
func (l *lineEditor) draw(redraw bool) {
	if redraw {
		l.erase()
	}
	l.out.WriteString(l.prompt)
	l.out.WriteString(l.line)
	endRow, endCol := l.advance(l.prompt, 0, 0)
	endRow, endCol = l.advance(l.line, endRow, endCol)
	if l.width > 0 && endCol == l.width {
		l.out.WriteString("\r\n") // leave the pending wrap at the edge
		endRow, endCol = endRow+1, 0
	}
	row, col := l.place(l.pos)
	if row == endRow && col == endCol {
		l.row = row
		return
	}
	moveRows(&l.out, row-endRow)
	l.out.WriteString("\r")
	if col > 0 {
		l.out.WriteString("\x1b[" + strconv.Itoa(col) + "C")
	}
	l.row = row
}

// place is the row and column (from the prompt's start) of the cursor
// at byte offset at of the line: on the grapheme that starts there, which
// begins the next row when it does not fit on this one (terminals wrap
// wide characters so), or, at the line's end, just after the last one.
func (l *lineEditor) place(at int) (row, col int) {
	row, col = l.advance(l.prompt, 0, 0)
	row, col = l.advance(l.line[:at], row, col)
	next := 1 // the cursor's own column at the line's end
	if g := displaywidth.StringGraphemes(l.line[at:]); g.Next() {
		next = g.Width()
	}
	if l.width > 0 && col > 0 && col+next > l.width {
		row, col = row+1, 0
	}
	return row, col
}

// advance moves (row, col) over s's graphemes as a terminal of l.width
// columns shows them.
func (l *lineEditor) advance(s string, row, col int) (int, int) {
	g := displaywidth.StringGraphemes(s)
	for g.Next() {
		w := g.Width()
		if l.width > 0 && col+w > l.width && col > 0 {
			row, col = row+1, 0
		}
		col += w
	}
	return row, col
}

// moveRows queues moving the cursor n rows down (up when n < 0).
func moveRows(b *bytes.Buffer, n int) {
	switch {
	case n < 0:
		b.WriteString("\x1b[" + strconv.Itoa(-n) + "A")
	case n > 0:
		b.WriteString("\x1b[" + strconv.Itoa(n) + "B")
	}
}

// boundaries are the byte offsets where the line's graphemes start, and
// its length.
func (l *lineEditor) boundaries() []int {
	var b []int
	off := 0
	g := displaywidth.StringGraphemes(l.line)
	for g.Next() {
		b = append(b, off)
		off += len(g.Value())
	}
	return append(b, len(l.line))
}

// prevBoundary is the start of the grapheme before offset i (0 at 0).
func (l *lineEditor) prevBoundary(i int) int {
	prev := 0
	for _, b := range l.boundaries() {
		if b >= i {
			break
		}
		prev = b
	}
	return prev
}

// nextBoundary is the end of the grapheme at offset i.
func (l *lineEditor) nextBoundary(i int) int {
	for _, b := range l.boundaries() {
		if b > i {
			return b
		}
	}
	return len(l.line)
}

// boundaryFrom is the first grapheme boundary at or after offset i.
func (l *lineEditor) boundaryFrom(i int) int {
	for _, b := range l.boundaries() {
		if b >= i {
			return b
		}
	}
	return len(l.line)
}

// wordLeft is the start of the word before the cursor (spaces skipped).
func (l *lineEditor) wordLeft() int {
	i := len(strings.TrimRight(l.line[:l.pos], " "))
	return strings.LastIndexByte(l.line[:i], ' ') + 1
}

// wordRight is the start of the word after the cursor's word.
func (l *lineEditor) wordRight() int {
	rest := l.line[l.pos:]
	i := strings.IndexByte(rest, ' ')
	if i < 0 {
		return len(l.line)
	}
	return l.pos + i + len(rest[i:]) - len(strings.TrimLeft(rest[i:], " "))
}
