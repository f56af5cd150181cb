package terminal

import (
	"strconv"
	"strings"
	"testing"
)

// TestScreenParsesOnlyTheEndOfBulkOutput: a backlog of bulk output under
// the hard cut (maxBacklog) but over keepTail is cut when parsing starts,
// so the emulator parses about keepTail bytes, not all of it, and the
// screen still shows the end of the output.
func TestScreenParsesOnlyTheEndOfBulkOutput(t *testing.T) {
	scr := newScreen(40, 5)
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
