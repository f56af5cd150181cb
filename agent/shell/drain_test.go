package shell_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/shell"
	"github.com/boxwire/boxwire/bridge/testutil"
)

// hookWait bounds each step a test hook or gate waits for. A step that
// does not come (the reader took another path on a loaded machine) costs
// at most this much, far inside the test's own Wait limit (waitLimit), so
// the test then judges the output instead of timing out: three chained
// waits of waitLimit each once made Wait itself miss its deadline.
const hookWait = 2 * time.Second

// seqOutput is what `seq 1 n` prints on a terminal.
func seqOutput(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\r\n", i)
	}
	return b.String()
}

// gatedWriter is an Output whose first Write blocks until gate is closed
// (or the wait limit passes), and every Write takes pause: a consumer that
// falls behind while the command finishes.
type gatedWriter struct {
	buffer
	gate  <-chan struct{}
	pause time.Duration
	once  sync.Once
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { testutil.WaitClosed(w.gate, hookWait) })
	time.Sleep(w.pause)
	return w.buffer.Write(p)
}

// runGated runs `seq 1 n` (as one write, so that it fits the terminal's
// buffers however the kernel's flushes fall: many small writes can fill
// them with a few KiB and the command would never exit while w holds the
// reader) and returns its output as w got it.
func runGated(t *testing.T, n int, w *gatedWriter) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "seq"), []byte(strings.ReplaceAll(seqOutput(n), "\r\n", "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	w.buffer = buffer{}
	p, err := shell.Start(context.Background(), shell.Spec{Command: []string{"cat", "seq"}, Dir: dir, Stdin: shell.StdinNull, Output: w})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wait(t, p)
	if cerr := p.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return w.String()
}

// The interleaving that lost the tail under load: the reader arms its
// drain deadline after the exit, and only then does the waiter's wake-up
// (a deadline of "now") land, before the reader's next read. Output still
// held by the terminal must be read all the same. The hook waits without
// failing (it runs where failing is not allowed): a missed step shows as
// wrong output instead.
func TestNoOutputLostWhenWakeUpLandsLate(t *testing.T) {
	for run := range 5 {
		exited, armed, woke := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var onceExited, onceArmed, onceWoke sync.Once
		shell.SetTestHook(func(event string) {
			switch event {
			case "exited": // the waiter, before its wake-up
				onceExited.Do(func() { close(exited); testutil.WaitClosed(armed, hookWait) })
			case "armed": // the reader, before its first read after the exit
				onceArmed.Do(func() { close(armed); testutil.WaitClosed(woke, hookWait) })
			case "woke":
				onceWoke.Do(func() { close(woke) })
			}
		})
		// The reader is held in its first Write until the command has
		// exited, so most of the output is still in the terminal then.
		got := runGated(t, 3000, &gatedWriter{gate: exited})
		shell.SetTestHook(nil)
		if want := seqOutput(3000); got != want {
			t.Fatalf("run %d: got %d bytes, want %d", run, len(got), len(want))
		}
	}
}

// A consumer slower than the drain limit still gets all the output the
// command wrote before it exited: the limit is for a background child that
// keeps the terminal open, not for output already written.
func TestNoOutputLostToSlowConsumer(t *testing.T) {
	exited := make(chan struct{})
	var once sync.Once
	shell.SetTestHook(func(event string) {
		if event == "exited" {
			once.Do(func() { close(exited) })
		}
	})
	defer shell.SetTestHook(nil)
	// About five reads of 4 KiB after the exit, each followed by a Write
	// that takes a third of the drain limit.
	got := runGated(t, 3000, &gatedWriter{gate: exited, pause: shell.DrainMax / 3})
	if want := seqOutput(3000); got != want {
		t.Fatalf("got %d bytes, want %d", len(got), len(want))
	}
}

// A background child that keeps writing to the terminal after the main
// process exited holds Wait for the drain limit only.
func TestChattyBackgroundChildDoesNotHangWait(t *testing.T) {
	p, out := start(t, shell.Spec{
		Command: bash(`(trap '' HUP; touch ready; exec yes) & echo started; until [ -e ready ]; do sleep 0.01; done`),
		Dir:     t.TempDir(),
		Stdin:   shell.StdinNull,
	})
	began := time.Now()
	if code, err := wait(t, p); code != 0 || err != nil {
		t.Fatalf("wait = %d, %v; want 0, nil", code, err)
	}
	if d := time.Since(began); d > shell.DrainMax+3*time.Second {
		t.Errorf("wait took %v", d)
	}
	if got := out.String(); !strings.HasPrefix(got, "started\r\n") || len(got) < 128<<10 {
		t.Errorf("output is %d bytes and begins %.40q", len(got), got)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
