package e2e_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// TestTerminalStreamInOrder: bulk output with content (every line
// different) arrives through container → agent → bridge → client whole and
// in order, byte for byte, through every place that gathers, merges or
// queues it (issue 15 item 3: no byte lost, none out of place).
func TestTerminalStreamInOrder(t *testing.T) {
	const lines = 1000000 // about 8.9 MB with the terminal's \r\n
	e := newEnv(t, helloScript)
	e.startBridge()
	s := e.dial("")
	c := e.dialTerm(s.conn.Thread(), false)
	a := c.open([]string{"seq", "1", strconv.Itoa(lines)}, 80, 24)
	ex := c.awaitMsg(wire.TypeTerminalExit)
	var x wire.TerminalExit
	if err := ex.Decode(&x); err != nil || x.Session != a.Session || x.ExitCode != 0 {
		t.Fatalf("terminal_exit %s: %v", ex.Data, err)
	}
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		want.WriteString(strconv.Itoa(i))
		want.WriteString("\r\n")
	}
	if got := c.output(a.Session); got != want.String() {
		t.Fatalf("output differs: %s", firstDifference(got, want.String()))
	}
}

// firstDifference describes where got first differs from want.
func firstDifference(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	around := func(s string) string {
		return quote(s[max(0, i-20):min(len(s), i+20)])
	}
	return fmt.Sprintf("%d bytes, want %d; first difference at byte %d: got …%s…, want …%s…", len(got), len(want), i, around(got), around(want))
}
