package terminal

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/charmbracelet/x/vt"
)

// TestScreenParsesOnlyTheEndOfBulkOutput: a backlog of bulk output under
// the hard cut (maxBacklog) but over keepTail is cut when parsing starts,
// so the emulator parses about keepTail bytes, not all of it, and the
// screen still shows the end of the output.
func TestScreenParsesOnlyTheEndOfBulkOutput(t *testing.T) {
	scr := runningScreen(t, 40, 5)
	var out strings.Builder
	for i := 1; out.Len() < maxBacklog-64<<10; i++ {
		out.WriteString(strconv.Itoa(i) + "\r\n")
	}
	out.WriteString("the-end\r\n")
	if out.Len() <= keepTail || out.Len() > maxBacklog {
		t.Fatalf("%d bytes of output: not between keepTail and maxBacklog", out.Len())
	}
	scr.write([]byte(out.String()))
	screen := scr.render() // waits until the emulator parsed what was written
	if !strings.Contains(screen, "the-end") {
		t.Fatalf("the end of the output is not on the screen: %q", screen)
	}
	scr.mu.Lock()
	fed := scr.fed
	scr.mu.Unlock()
	if fed > keepTail+uint64(len(resetLine)) {
		t.Errorf("the emulator parsed %d bytes of %d, want at most keepTail (%d)", fed, out.Len(), keepTail)
	}
}

// TestShrinkParser: every screen's emulator gets a parser buffer of
// parserDataSize, not vt's 4 MiB, so twenty open sessions hold well under
// a MiB of heap each (about 4.5 MiB each with vt's buffer).
func TestShrinkParser(t *testing.T) {
	if !shrinkParser(vt.NewEmulator(80, 24)) {
		t.Fatal("shrinkParser found no parser in vt.Emulator: the vt version changed; see shrinkParser")
	}
	const n = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	screens := make([]*screen, n)
	for i := range screens {
		screens[i] = newScreen(80, 24)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(screens)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d KiB of heap a screen", per>>10)
	if per > 1<<20 {
		t.Errorf("a screen holds %d KiB of heap, want under 1 MiB", per>>10)
	}
}

// TestLongStringSequence: an OSC string longer than the parser's buffer
// (a 200 KB OSC 52 clipboard copy) is cut, and what follows it is parsed
// and drawn as usual.
func TestLongStringSequence(t *testing.T) {
	scr := runningScreen(t, 40, 5)
	scr.write([]byte("before\r\n\x1b]52;c;" + strings.Repeat("QUJD", 50<<10) + "\x07after\r\n\x1b]0;a title\x07last"))
	screen := scr.render()
	for _, want := range []string{"before", "after", "last"} {
		if !strings.Contains(screen, want) {
			t.Errorf("%q is not on the screen: %q", want, screen)
		}
	}
}

func BenchmarkNewScreen(b *testing.B) {
	for b.Loop() {
		newScreen(80, 24)
	}
}

// runningScreen is a new screen whose emulator is fed until the test ends.
func runningScreen(t *testing.T, cols, rows uint16) *screen {
	scr := newScreen(cols, rows)
	drained := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		scr.run(drained)
	}()
	t.Cleanup(func() {
		scr.close()
		<-done
		<-drained
	})
	return scr
}
