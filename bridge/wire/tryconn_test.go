package wire_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// socketPair is a unix stream connection: w, wrapped in a TryConn, with
// small buffers so a try meets a full socket soon, and its peer r.
func socketPair(t *testing.T) (w *wire.TryConn, r net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.SetsockoptInt(fds[0], syscall.SOL_SOCKET, syscall.SO_SNDBUF, 8<<10); err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		conns[i], err = net.FileConn(f) // a copy of the descriptor
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { conns[0].Close(); conns[1].Close() })
	tc := wire.TryConnOf(wire.NewTryConn(conns[0]))
	if tc == nil {
		t.Fatal("a unix socket is not a TryConn")
	}
	return tc, conns[1]
}

// pattern is n bytes that show where a byte went missing or moved.
func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((i*7 + seed) % 251)
	}
	return b
}

// A try writes what the socket takes at once and keeps the rest, never
// waiting; the next write outside a try sends the kept bytes first, so
// the peer gets everything in order.
func TestTryConnKeepsWhatTheSocketCannotTake(t *testing.T) {
	t.Parallel()
	w, r := socketPair(t)
	first, second, third := pattern(1<<20, 1), pattern(300<<10, 2), pattern(5000, 3)

	w.Try(true)
	start := time.Now()
	for _, b := range [][]byte{first, second} {
		if n, err := w.Write(b); n != len(b) || err != nil {
			t.Fatalf("write in a try: %d of %d, %v", n, len(b), err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a try waited %v for a socket nobody reads", d)
	}
	if !w.Blocked() {
		t.Fatal("1.3 MiB into an unread socket, and nothing kept")
	}
	w.Try(false)

	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	if _, err := w.Write(third); err != nil { // kept bytes first, then these
		t.Fatalf("write after the try: %v", err)
	}
	if w.Blocked() {
		t.Fatal("bytes still kept after a write outside a try")
	}
	w.Close()
	want := append(append(append([]byte{}, first...), second...), third...)
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("the peer got %d bytes, want %d (equal: %v)", len(b), len(want), bytes.Equal(b, want))
	}
}

// Flush writes what a try kept, with nothing after it.
func TestTryConnFlush(t *testing.T) {
	t.Parallel()
	w, r := socketPair(t)
	data := pattern(512<<10, 4)
	w.Try(true)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	w.Try(false)
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(data))
		_, _ = io.ReadFull(r, b)
		got <- b
	}()
	if err := w.Flush(5 * time.Second); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatal("the peer did not get the bytes the try kept")
	}
	if w.Blocked() {
		t.Fatal("bytes kept after Flush")
	}
	if err := w.Flush(time.Second); err != nil {
		t.Fatalf("flush with nothing kept: %v", err)
	}
}

// A try's write to a connection the peer closed fails, and every later
// write and Flush fails with the same error: nothing after a lost byte
// can be sent.
func TestTryConnFailedTryEndsWrites(t *testing.T) {
	t.Parallel()
	w, r := socketPair(t)
	r.Close()
	w.Try(true)
	var err error
	for range 100 { // the first write may still land in the buffer
		if _, err = w.Write(pattern(64<<10, 5)); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("write to a closed peer in a try: %v", err)
	}
	if !w.Blocked() {
		t.Fatal("a failed try does not report Blocked")
	}
	w.Try(false)
	if _, werr := w.Write([]byte("x")); !errors.Is(werr, err) {
		t.Fatalf("write after the failed try: %v, want %v", werr, err)
	}
	if ferr := w.Flush(time.Second); !errors.Is(ferr, err) {
		t.Fatalf("flush after the failed try: %v, want %v", ferr, err)
	}
}

// A connection with no socket to write to without waiting is left as it
// is.
func TestNewTryConnWithoutSocket(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if c := wire.NewTryConn(a); c != a || wire.TryConnOf(c) != nil {
		t.Fatalf("a pipe became %T", c)
	}
}
