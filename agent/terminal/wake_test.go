package terminal_test

import (
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/terminal"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Watch implements wire.Target for the counter (stream_test.go): a session
// waiting for it is woken when its stall is over.
func (k *counter) Watch(w *wire.Waker) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stalled.IsZero() {
		w.Wake()
		return
	}
	time.AfterFunc(time.Until(k.stalled.Add(k.stallFor)), w.Wake)
}

// Unwatch implements wire.Target; a late wake from Watch only makes the
// session try again.
func (k *counter) Unwatch(*wire.Waker) {}

// TestFullWatcherWokenWhenItDrains: a lone watcher that is full, then takes
// output again well within StallLimit, is woken at once and keeps every
// byte: the session waits for it, without polling, and does not detach it.
func TestFullWatcherWokenWhenItDrains(t *testing.T) {
	r := newRegistry(t, terminal.Config{StallLimit: waitFor})
	s := open(t, r, wire.TerminalOpen{Command: []string{"bash", "-c", "stty -echo; read x; seq 1 20000; read y"}})
	k := &sink{}
	s.Attach(k, "")
	k.setFull(true)
	if err := s.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the session is waiting for k
	began := time.Now()
	k.setFull(false)
	k.await(t, "all output", func(out string, _ []wire.Envelope) bool { return containsLine(out, "20000") })
	if took := time.Since(began); took > waitFor/2 {
		t.Fatalf("output resumed after %v", took)
	}
	for _, m := range k.msgs {
		if m.Type == wire.TypeTerminalDetached {
			t.Fatal("a watcher that drained was detached")
		}
	}
}

func containsLine(out, line string) bool {
	for i := 0; i+len(line)+4 <= len(out); i++ {
		if out[i:i+2] == "\r\n" && out[i+2:i+2+len(line)] == line && out[i+2+len(line):i+4+len(line)] == "\r\n" {
			return true
		}
	}
	return false
}
