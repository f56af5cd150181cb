package cli_test

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clipperhouse/displaywidth"

	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/client/cli"
)

// screen is a small terminal emulator: it shows graphemes by display
// width, wraps like xterm (a pending wrap at the last column; a wide
// character that does not fit starts the next row) and knows the
// sequences the editor writes (CR, LF, CSI A B C D J K, 2J, H).
type screen struct {
	width    int
	cells    [][]string // rows of cells; "" is blank, "\x00" the right half of a wide one
	row, col int
	pending  bool // the pending wrap at the last column
}

func (s *screen) Write(p []byte) (int, error) {
	str := string(p)
	for len(str) > 0 {
		switch {
		case str[0] == '\r':
			s.col, s.pending, str = 0, false, str[1:]
		case str[0] == '\n':
			s.row, s.pending, str = s.row+1, false, str[1:]
		case strings.HasPrefix(str, "\x1b["):
			i := strings.IndexAny(str[2:], "ABCDHJK") + 2
			s.csi(str[2:i], str[i])
			str = str[i+1:]
		default:
			g := displaywidth.StringGraphemes(str)
			g.Next()
			s.print(g.Value(), g.Width())
			str = str[len(g.Value()):]
		}
	}
	return len(p), nil
}

func (s *screen) csi(param string, final byte) {
	n, err := strconv.Atoi(param)
	if err != nil {
		n = 1
	}
	s.pending = false
	switch final {
	case 'A':
		s.row = max(s.row-n, 0)
	case 'B':
		s.row += n
	case 'C':
		s.col = min(s.col+n, s.width-1)
	case 'D':
		s.col = max(s.col-n, 0)
	case 'H':
		s.row, s.col = 0, 0
	case 'J':
		if param == "2" {
			s.cells = nil
			return
		}
		s.clear(s.row, s.col)
		if s.row+1 < len(s.cells) {
			s.cells = s.cells[:s.row+1]
		}
	case 'K':
		s.clear(s.row, s.col)
	}
}

func (s *screen) clear(row, col int) {
	if row < len(s.cells) && col < len(s.cells[row]) {
		s.cells[row] = s.cells[row][:col]
	}
}

func (s *screen) print(g string, w int) {
	if w == 0 { // joins the cell before
		s.put(s.row, max(s.col-1, 0), s.cell(s.row, max(s.col-1, 0))+g)
		return
	}
	if s.pending || s.col+w > s.width {
		s.row, s.col, s.pending = s.row+1, 0, false
	}
	s.put(s.row, s.col, g)
	if w == 2 {
		s.put(s.row, s.col+1, "\x00")
	}
	s.col += w
	if s.col >= s.width {
		s.col, s.pending = s.width-1, true
	}
}

func (s *screen) cell(row, col int) string {
	if row < len(s.cells) && col < len(s.cells[row]) {
		return s.cells[row][col]
	}
	return ""
}

func (s *screen) put(row, col int, g string) {
	for len(s.cells) <= row {
		s.cells = append(s.cells, nil)
	}
	for len(s.cells[row]) <= col {
		s.cells[row] = append(s.cells[row], "")
	}
	s.cells[row][col] = g
}

// text is what the screen shows, rows joined by "|", trailing blanks cut.
func (s *screen) text() string {
	rows := make([]string, len(s.cells))
	for i, r := range s.cells {
		var b strings.Builder
		for _, c := range r {
			switch c {
			case "\x00":
			case "":
				b.WriteByte(' ')
			default:
				b.WriteString(c)
			}
		}
		rows[i] = strings.TrimRight(b.String(), " ")
	}
	return strings.Join(rows, "|")
}

// keyboard is the editor's terminal: keys typed go to Read, one chunk a
// call, and its output to the screen.
type keyboard struct {
	mu     sync.Mutex
	scr    screen
	ready  chan struct{} // the editor asks for keys: it has drawn the last ones
	chunks chan string
}

func (k *keyboard) Read(p []byte) (int, error) {
	k.ready <- struct{}{}
	chunk, ok := <-k.chunks
	if !ok {
		return 0, io.EOF
	}
	return copy(p, chunk), nil
}

func (k *keyboard) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.scr.Write(p)
}

// state is the screen's text and the cursor's row and column.
func (k *keyboard) state() (string, int, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.scr.text(), k.scr.row, k.scr.col
}

// waitReady waits until the editor has played every key sent.
func (k *keyboard) waitReady(t *testing.T) {
	t.Helper()
	testutil.RequireReceive(t, "the editor asking for keys", k.ready, waitTimeout)
}

// press types each chunk of keys in turn and waits until the editor has
// played them all.
func (k *keyboard) press(t *testing.T, chunks ...string) {
	t.Helper()
	for _, keys := range chunks {
		k.waitReady(t)
		k.chunks <- keys
	}
	k.waitReady(t)
}

// startEditor runs ReadLine on a new editor of width columns; the result
// comes on the returned channel.
func startEditor(t *testing.T, width int) (*keyboard, *cli.LineEditor, <-chan string) {
	t.Helper()
	k := &keyboard{scr: screen{width: width}, ready: make(chan struct{}, 1), chunks: make(chan string)}
	l := cli.NewLineEditor(k, "› ", width)
	done := make(chan string, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		line, err := l.ReadLine()
		if errors.Is(err, io.EOF) {
			line = "EOF"
		}
		done <- line
	}()
	t.Cleanup(func() {
		close(k.chunks)
		select {
		case <-finished:
		case <-time.After(waitTimeout):
			t.Error("ReadLine did not return")
		}
	})
	return k, l, done
}

// awaitLine returns what ReadLine returned ("EOF" for io.EOF).
func awaitLine(t *testing.T, done <-chan string) string {
	t.Helper()
	return testutil.RequireReceive(t, "ReadLine's line", done, waitTimeout)
}

const (
	left  = "\x1b[D"
	right = "\x1b[C"
	bs    = "\x7f"
	del   = "\x1b[3~"
)

// TestLineEditorColumns types keys, one chunk each, and checks the screen
// and the cursor: the cursor moves, and lines wrap, by display columns.
func TestLineEditorColumns(t *testing.T) {
	tests := []struct {
		name     string
		width    int
		keys     []string
		screen   string // rows joined by |
		row, col int    // the cursor
		line     string // the line Enter returns
	}{
		{"ascii", 20, []string{"abc"}, "› abc", 0, 5, "abc"},
		{"wide", 20, []string{"日本"}, "› 日本", 0, 6, "日本"},
		{"left over a wide char", 20, []string{"日本", left}, "› 日本", 0, 4, "日本"},
		{"left twice", 20, []string{"日本", left, left}, "› 日本", 0, 2, "日本"},
		{"right again", 20, []string{"日本", left, left, right}, "› 日本", 0, 4, "日本"},
		{"backspace a wide char", 20, []string{"日本語", bs}, "› 日本", 0, 6, "日本"},
		{"backspace in the middle", 20, []string{"日本語", left, bs}, "› 日語", 0, 4, "日語"},
		{"insert before a wide char", 20, []string{"日本", left, "x"}, "› 日x本", 0, 5, "日x本"},
		{"delete a wide char", 20, []string{"日本", "\x01", del}, "› 本", 0, 2, "本"},
		{"emoji", 20, []string{"a👍b", left, left}, "› a👍b", 0, 3, "a👍b"},
		{"combining mark typed with its base", 20, []string{"e\u0301x", left}, "› e\u0301x", 0, 3, "e\u0301x"},
		{"combining mark typed alone", 20, []string{"e", "\u0301", "x", left, left}, "› e\u0301x", 0, 2, "e\u0301x"},
		{"backspace a letter and its mark", 20, []string{"ae\u0301", bs}, "› a", 0, 3, "a"},
		{"end", 20, []string{"日本", "\x01", "\x05"}, "› 日本", 0, 6, "日本"},
		{"kill to start", 20, []string{"日本語", left, "\x15"}, "› 語", 0, 2, "語"},
		{"kill to end", 20, []string{"日本語", left, left, "\x0b"}, "› 日", 0, 4, "日"},
		{"kill word", 20, []string{"ab 日本", "\x17"}, "› ab", 0, 5, "ab "},
		{"wraps at the edge", 10, []string{"abcdefgh"}, "› abcdefgh", 1, 0, "abcdefgh"},
		{"a wide char that does not fit wraps", 10, []string{"abcdefg日"}, "› abcdefg|日", 1, 2, "abcdefg日"},
		{"cursor on the wrapped wide char", 10, []string{"abcdefg日", left}, "› abcdefg|日", 1, 0, "abcdefg日"},
		{"back over the wrap", 10, []string{"abcdefg日", left, left}, "› abcdefg|日", 0, 8, "abcdefg日"},
		{"wide chars over two rows", 10, []string{"日本語日本語"}, "› 日本語日|本語", 1, 4, "日本語日本語"},
		{"edit the first row of two", 10, []string{"日本語日本語", "\x01", del}, "› 本語日本|語", 0, 2, "本語日本語"},
		{"insert after a letter and its mark", 20, []string{"e\u0301", "\x01", right, "x"}, "› e\u0301x", 0, 4, "e\u0301x"},
		{"shrink back to one row", 10, []string{"日本語日本語", bs, bs}, "› 日本語日", 1, 0, "日本語日"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, _, done := startEditor(t, tt.width)
			k.press(t, tt.keys...)
			screen, row, col := k.state()
			if screen != tt.screen || row != tt.row || col != tt.col {
				t.Errorf("screen %q, cursor %d,%d; want %q, %d,%d", screen, row, col, tt.screen, tt.row, tt.col)
			}
			k.chunks <- "\r"
			if line := awaitLine(t, done); line != tt.line {
				t.Errorf("line %q, want %q", line, tt.line)
			}
		})
	}
}

// TestLineEditorOutputAbove: output written while a line is edited goes
// above it, and the line is drawn again with the cursor where it was.
func TestLineEditorOutputAbove(t *testing.T) {
	k, l, done := startEditor(t, 10)
	k.press(t, "日本語日本", left)
	if _, err := l.Write([]byte("out 1\n表示\n")); err != nil {
		t.Fatal(err)
	}
	screen, row, col := k.state()
	if want := "out 1|表示|› 日本語日|本"; screen != want || row != 3 || col != 0 {
		t.Errorf("screen %q, cursor %d,%d; want %q, 3,0", screen, row, col, want)
	}
	k.chunks <- "\r"
	if line := awaitLine(t, done); line != "日本語日本" {
		t.Errorf("line %q", line)
	}
}

// TestLineEditorEOF: Ctrl-D on an empty line is EOF; on a line it deletes.
func TestLineEditorEOF(t *testing.T) {
	k, _, done := startEditor(t, 20)
	k.press(t, "日"+left+"\x04")
	if screen, _, col := k.state(); screen != "›" || col != 2 {
		t.Errorf("screen %q, cursor at %d; want the line empty", screen, col)
	}
	k.chunks <- "\x04"
	if line := awaitLine(t, done); line != "EOF" {
		t.Errorf("ReadLine = %q, want EOF", line)
	}
}

// TestLineEditorKeepsKeysAfterEnter: lines pasted in one read come one a
// ReadLine, the second without another read.
func TestLineEditorKeepsKeysAfterEnter(t *testing.T) {
	k, l, first := startEditor(t, 20)
	k.waitReady(t)
	k.chunks <- "日本\r語\r"
	second := make(chan string, 1)
	for _, want := range []string{"日本", "語"} {
		done := first
		if want == "語" {
			done = second
			go func() {
				line, _ := l.ReadLine()
				second <- line
			}()
		}
		if line := awaitLine(t, done); line != want {
			t.Errorf("line %q, want %q", line, want)
		}
	}
	if screen, _, _ := k.state(); screen != "› 日本|› 語" {
		t.Errorf("screen %q", screen)
	}
}
