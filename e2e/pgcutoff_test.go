package e2e_test

import (
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// tcpProxy stands between one bridge and PostgreSQL, so a test can cut
// that bridge off from the store while the others reach it. Its
// goroutines are owned by it: the test's cleanup waits for them.
type tcpProxy struct {
	t      *testing.T
	target string // host:port of the database
	ln     net.Listener
	wg     sync.WaitGroup

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// newTCPProxy listens on a loopback port and copies each connection to
// target until cut.
func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{t: t, target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.setCut(true)
		p.wg.Wait()
	})
	return p
}

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		if !cut {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if cut { // refused: the bridge's pool cannot connect
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.pipe(c)
	}
}

// pipe copies c to a new connection to the target and back until either
// ends or the proxy is cut.
func (p *tcpProxy) pipe(c net.Conn) {
	defer p.wg.Done()
	defer p.drop(c)
	d, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.conns[d] = struct{}{}
	p.mu.Unlock()
	defer p.drop(d)
	done := make(chan struct{})
	go func() { // owned: pipe waits for it below
		defer close(done)
		_, _ = io.Copy(d, c)
		d.Close()
	}()
	_, _ = io.Copy(c, d)
	c.Close()
	<-done
}

func (p *tcpProxy) drop(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// setCut cuts (every connection closed, new ones refused) or mends the
// proxy.
func (p *tcpProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
}

// via returns the database URL rawURL with its host:port replaced by the
// proxy's.
func (p *tcpProxy) via(rawURL string) string {
	p.t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		p.t.Fatal(err)
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

// A bridge cut off from the store past its lease expiry (issue 22): two
// bridges on PostgreSQL (lease TTL 2 s), bridge 0 through a TCP proxy.
// Bridge 0 relays a thread whose command streams, watched by its own
// client and by a client of bridge 1. The proxy is cut: bridge 0 cannot
// renew the thread's lease while bridge 1 reaches the store, so once the
// lease has run out bridge 0 stops relaying — its client is closed with
// 1001 saying so, its agent connection ends — and bridge 1 takes the
// thread over. Bridge 0's client reconnects to bridge 1; both clients see
// every seq from 1 to the turn's end exactly once and all 150 lines.
// (When the store is down for every bridge they keep relaying:
// TestStorePostgresDownMidTurnThreeBridges.)
func TestStorePostgresBridgeCutOffFromTheStore(t *testing.T) {
	_, dbURL := postgres(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newTCPProxy(t, u.Host)
	ttl := "BOXWIRE_LEASE_TTL=" + failoverTTL.String()
	envs := []*env{newEnv(t, failoverScript), newEnv(t, failoverScript)}
	envs[1].token = envs[0].token
	envs[0].startBridge("BOXWIRE_STORE="+proxy.via(dbURL), ttl)
	envs[1].startBridge("BOXWIRE_STORE="+dbURL, ttl)
	for _, e := range envs {
		e.cleanAtEnd()
	}
	books := []*seqBook{newSeqBook(), newSeqBook()}
	w0 := envs[0].watch("", 0, books[0]) // made, and relayed, by bridge 0
	thread := w0.thread
	envs[1].watch(thread, 0, books[1]) // forwarded
	id := w0.say(t, "please run the lines")
	books[1].await(t, "the command's output", turnTimeout, func(wire.Envelope) bool {
		return strings.Contains(outputOf(books[1].events(), id), "line 20")
	})
	proxy.setCut(true)
	cut := time.Now()
	select {
	case <-w0.done:
	case <-time.After(failoverTTL + 20*time.Second):
		t.Fatalf("bridge 0's client still connected %s after the cut:\n%s", time.Since(cut), envs[0].bridge.logText())
	}
	var ce *websocket.CloseError
	if !errors.As(w0.err, &ce) || ce.Code != websocket.CloseGoingAway || !strings.Contains(ce.Text, "cannot reach the store") {
		t.Errorf("bridge 0's client ended with %v; want 1001 saying the bridge cannot reach the store", w0.err)
	}
	t.Logf("bridge 0 let its client go %s after the cut, after seq %d", time.Since(cut).Round(100*time.Millisecond), books[0].last())
	envs[1].rewatch(thread, books[0], time.Now().Add(failoverTTL+time.Minute))
	for k, b := range books {
		b.await(t, "turn_done through client "+itoa(k), turnTimeout, isType(wire.TypeTurnDone, id))
	}
	checkLinesTurn(t, books, id)
	if log := envs[0].bridge.logText(); !strings.Contains(log, "cut off from the store past the leases' expiry") {
		t.Errorf("bridge 0 did not log being cut off:\n%s", log)
	}
	if !strings.Contains(envs[1].bridge.logText(), "took over a thread whose bridge is gone") {
		t.Error("bridge 1 did not take the thread over")
	}
	proxy.setCut(false) // bridge 0's queued writes go in (or are fenced) before it stops
}
