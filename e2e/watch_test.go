package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// seqBook counts every numbered event the watchers of one thread received,
// by seq, across reconnects, so a case can assert that none is missing or
// duplicated. It is safe for concurrent use.
type seqBook struct {
	mu   sync.Mutex
	seen map[uint64]int
	evs  []wire.Envelope // in arrival order
	out  int64           // tool_output bytes
}

func newSeqBook() *seqBook { return &seqBook{seen: map[uint64]int{}} }

func (b *seqBook) add(env wire.Envelope) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen[env.Seq]++
	b.evs = append(b.evs, env)
	var out wire.ToolOutput
	if env.Type == wire.TypeToolOutput && env.Decode(&out) == nil {
		b.out += int64(len(out.Output))
	}
}

// outBytes is the tool_output bytes received so far.
func (b *seqBook) outBytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out
}

// events returns a copy of what arrived so far.
func (b *seqBook) events() []wire.Envelope {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]wire.Envelope(nil), b.evs...)
}

// last is the largest seq seen.
func (b *seqBook) last() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var m uint64
	for s := range b.seen {
		m = max(m, s)
	}
	return m
}

// check fails t unless every seq from 1 to the largest seen arrived
// exactly once, and returns that largest seq.
func (b *seqBook) check(t *testing.T) uint64 {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var top uint64
	for s := range b.seen {
		top = max(top, s)
	}
	var missing, dup []uint64
	for s := uint64(1); s <= top; s++ {
		switch n := b.seen[s]; {
		case n == 0:
			missing = append(missing, s)
		case n > 1:
			dup = append(dup, s)
		}
	}
	if len(missing) > 0 || len(dup) > 0 {
		t.Errorf("seqs 1..%d: missing %v, duplicated %v", top, cut(missing), cut(dup))
	}
	return top
}

func cut(s []uint64) []uint64 {
	if len(s) > 20 {
		return s[:20]
	}
	return s
}

// watcher is a raw WebSocket client on a thread that records every
// numbered event into a seqBook. It reads with the bare socket (not
// chat.Conn, which drops repeats) so duplicates sent by the bridge show.
// Its reader goroutine is owned by the watcher: close waits for it.
type watcher struct {
	thread string
	ws     *websocket.Conn
	book   *seqBook
	done   chan struct{}
	err    error // why the reader stopped; after done
}

// watch dials thread with afterSeq and records its events into book.
func (e *env) watch(thread string, afterSeq uint64, book *seqBook) *watcher {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	ws, hello, err := chat.DialWebSocket(ctx, chat.Config{URL: e.bridge.url + wire.Path, Token: e.token, Thread: thread, AfterSeq: afterSeq})
	if err != nil {
		e.t.Fatalf("watch %s after %d: %v\n%s", thread, afterSeq, err, e.bridge.logText())
	}
	w := &watcher{thread: hello.Thread, ws: ws, book: book, done: make(chan struct{})}
	go w.read()
	e.t.Cleanup(w.close)
	return w
}

func (w *watcher) read() {
	defer close(w.done)
	for {
		_, data, err := w.ws.ReadMessage()
		if err != nil {
			w.err = err
			return
		}
		env, err := wire.Parse(data)
		if err == nil && env.Seq > 0 {
			w.book.add(env)
		}
	}
}

// drop cuts the connection without a close frame, as a lost network
// would, and waits for the reader.
func (w *watcher) drop() {
	if nc, ok := w.ws.NetConn().(*net.TCPConn); ok {
		_ = nc.SetLinger(0)
	}
	_ = w.ws.NetConn().Close()
	<-w.done
}

// close closes the connection and waits for the reader; it is idempotent.
func (w *watcher) close() {
	_ = w.ws.Close()
	<-w.done
}

// await waits (at most wait) until an event satisfying ok has been
// recorded, and returns it.
func (b *seqBook) await(t *testing.T, what string, wait time.Duration, ok func(wire.Envelope) bool) wire.Envelope {
	t.Helper()
	return testutil.Poll(t, what, wait, func() (wire.Envelope, error) {
		if ev, found := find(b.events(), ok); found {
			return ev, nil
		}
		return wire.Envelope{}, fmt.Errorf("last seq %d", b.last())
	})
}

// isType matches events of type typ (and id, when not empty).
func isType(typ wire.Type, id string) func(wire.Envelope) bool {
	return func(ev wire.Envelope) bool { return ev.Type == typ && (id == "" || ev.ID == id) }
}

// outputOf concatenates the tool_output of call id in seq order, each
// seq once.
func outputOf(evs []wire.Envelope, id string) string {
	bySeq := map[uint64]string{}
	var top uint64
	for _, ev := range evs {
		if ev.Type != wire.TypeToolOutput || ev.ID != id {
			continue
		}
		var out wire.ToolOutput
		if ev.Decode(&out) == nil {
			bySeq[ev.Seq] = out.Output
			top = max(top, ev.Seq)
		}
	}
	var sb strings.Builder
	for s := uint64(1); s <= top; s++ {
		sb.WriteString(bySeq[s])
	}
	return sb.String()
}

// run sends a run_tool request on w without waiting for its result and
// returns the request id. Only the test goroutine writes to w.
func (w *watcher) run(t *testing.T, name string, args any) string {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	id := "rt-" + randHex(6)
	data, err := wire.Marshal(wire.MustNew(wire.TypeRunTool, w.thread, id, wire.RunTool{Name: name, Arguments: raw}))
	if err != nil {
		t.Fatal(err)
	}
	_ = w.ws.SetWriteDeadline(time.Now().Add(eventTimeout))
	if err := w.ws.WriteMessage(websocket.TextMessage, data); err != nil {
		t.Fatalf("send run_tool: %v", err)
	}
	return id
}

// find returns the first event ok accepts.
func find(evs []wire.Envelope, ok func(wire.Envelope) bool) (wire.Envelope, bool) {
	for _, ev := range evs {
		if ok(ev) {
			return ev, true
		}
	}
	return wire.Envelope{}, false
}

func itoa(n int) string { return strconv.Itoa(n) }

// countLines fails t unless out holds "line 1" … "line n" in order.
func countLines(t *testing.T, out string, n int) {
	t.Helper()
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "line ") {
			got = append(got, l)
		}
	}
	if len(got) != n {
		t.Fatalf("%d output lines, want %d", len(got), n)
	}
	for i, l := range got {
		if l != fmt.Sprintf("line %d", i+1) {
			t.Fatalf("output line %d is %q", i+1, l)
		}
	}
}
