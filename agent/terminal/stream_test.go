package terminal_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/terminal"
	"github.com/boxwire/boxwire/bridge/wire"
)

// counter is a Sink that only counts output bytes. stallAt, when set, makes
// it refuse frames for stallFor once it has counted stallAt bytes: the
// watcher is busy for a while (not too slow), as a client over a loaded
// link is.
type counter struct {
	stallAt  int64
	stallFor time.Duration

	mu      sync.Mutex
	n       int64
	stalled time.Time // when the stall began; zero before it
	exit    *wire.TerminalExit
	msgs    []wire.Type
	done    chan struct{} // closed at terminal_exit
}

func newCounter() *counter { return &counter{done: make(chan struct{})} }

func (k *counter) Send(env wire.Envelope) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.msgs = append(k.msgs, env.Type)
	if env.Type == wire.TypeTerminalExit && k.exit == nil {
		var x wire.TerminalExit
		_ = env.Decode(&x)
		k.exit = &x
		close(k.done)
	}
}

func (k *counter) Offer(frame []byte) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stallAt > 0 && k.n >= k.stallAt {
		if k.stalled.IsZero() {
			k.stalled = time.Now()
		}
		if time.Since(k.stalled) < k.stallFor {
			return false
		}
	}
	f, err := wire.ParseFrame(frame)
	if err != nil || f.Kind != wire.FrameOutput {
		panic("bad frame")
	}
	k.n += int64(len(f.Data))
	return true
}

// await waits for terminal_exit and returns the bytes counted before it.
func (k *counter) await(t *testing.T) int64 {
	t.Helper()
	select {
	case <-k.done:
	case <-time.After(30 * time.Second):
		k.mu.Lock()
		defer k.mu.Unlock()
		t.Fatalf("no terminal_exit within 30s; %d bytes, messages %v", k.n, k.msgs)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.exit.ExitCode != 0 {
		t.Fatalf("exit %+v", *k.exit)
	}
	return k.n
}

// TestOpenerGetsEveryByte: the connection that opens a session watches it
// from its first byte: a program that prints at once loses nothing to the
// time between its start and the opener's attach.
func TestOpenerGetsEveryByte(t *testing.T) {
	const size = 256 << 10
	r := newRegistry(t, terminal.Config{})
	for i := range 20 {
		k := newCounter()
		s := openWatched(t, r, k, fmt.Sprintf("head -c %d /dev/zero", size))
		if n := k.await(t); n != size {
			t.Fatalf("round %d: the opener got %d bytes of %d", i, n, size)
		}
		if err := r.CloseSession(s.ID()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEveryByteAfterExitWhileWatcherBusy: the program has ended while its
// last output still waits in the PTY for a watcher that is busy for longer
// than the drain of a finished command takes; the output is read to the
// end all the same, because the watcher is slow, not gone.
func TestEveryByteAfterExitWhileWatcherBusy(t *testing.T) {
	const size = 1 << 20
	r := newRegistry(t, terminal.Config{})
	k := newCounter()
	// Busy once all but the last 16 KiB arrived: those fit in the PTY, so
	// head exits while the watcher is still busy.
	k.stallAt, k.stallFor = size-16<<10, 3*time.Second
	openWatched(t, r, k, fmt.Sprintf("head -c %d /dev/zero", size))
	if n := k.await(t); n != size {
		t.Fatalf("the watcher got %d bytes of %d", n, size)
	}
}

// TestStreamComplete: bulk output reaches a watcher that keeps up whole,
// many times over (make stress runs it beside CPU spinners, where the end
// of a stream races the program's exit).
func TestStreamComplete(t *testing.T) {
	const size = 4 << 20
	r := newRegistry(t, terminal.Config{})
	for i := range 5 {
		k := newCounter()
		s := openWatched(t, r, k, fmt.Sprintf("head -c %d /dev/zero", size))
		if n := k.await(t); n != size {
			t.Fatalf("round %d: got %d bytes of %d", i, n, size)
		}
		if err := r.CloseSession(s.ID()); err != nil {
			t.Fatal(err)
		}
	}
}

// openWatched opens sh -c cmd with k as its opener.
func openWatched(t *testing.T, r *terminal.Registry, k terminal.Sink, cmd string) *terminal.Session {
	t.Helper()
	s, err := r.Open(wire.TerminalOpen{Command: []string{"sh", "-c", cmd}}, k, "open")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestScreenAfterBulkOutput: after more output than the screen's backlog
// keeps (so it was cut), an attach still shows the end of it.
func TestScreenAfterBulkOutput(t *testing.T) {
	const lines = 300000 // about 2.3 MiB with the terminal's \r\n
	want := int64(len("the-end\r\n"))
	for i := 1; i <= lines; i++ {
		want += int64(len(strconv.Itoa(i)) + 2)
	}
	r := newRegistry(t, terminal.Config{})
	k := newCounter()
	s, err := r.Open(wire.TerminalOpen{Command: []string{"sh", "-c", fmt.Sprintf("seq 1 %d | cat; echo the-end; sleep 100", lines)}, Cols: 40, Rows: 5}, k, "")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		k.mu.Lock()
		n := k.n
		k.mu.Unlock()
		if n >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d bytes of output, want %d", n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	late := &sink{}
	s.Attach(late, "")
	a := decode[wire.TerminalAttached](t, late.msgs[0])
	if !strings.Contains(a.Screen, strconv.Itoa(lines)) || !strings.Contains(a.Screen, "the-end") {
		t.Fatalf("the end of the output is not on the screen: %q", a.Screen)
	}
}
