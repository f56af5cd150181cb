package mcpclient

import (
	"strings"
	"sync"
)

// tailBytes is how much of a server's stderr a Tail keeps.
const tailBytes = 2048

// Tail keeps the last 2 KiB written to it: a server command's stderr,
// for the error that says why the server ended. It is safe for concurrent
// use.
type Tail struct {
	mu  sync.Mutex
	buf []byte
}

// Write keeps the end of p.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailBytes {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(p), nil
}

// Words is "; its standard error ended: ..." (its last lines),
// or "" when nothing was written or t is nil.
func (t *Tail) Words() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	w := strings.TrimSpace(strings.ToValidUTF8(string(t.buf), ""))
	if w == "" {
		return ""
	}
	if i := strings.LastIndexByte(w, '\n'); i >= 0 && len(w)-i < 400 && i > len(w)-400 {
		w = w[max(0, len(w)-400):]
	}
	return "; its standard error ended: " + w
}
