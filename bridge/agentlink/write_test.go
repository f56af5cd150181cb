package agentlink_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/agentlink"
	"github.com/boxwire/boxwire/bridge/wire"
)

// stuckAgent is an agent that accepts the link's connection, on a unix
// socket (fixed buffers), and never reads from it: the link's writer
// blocks for good in its first large write. cut closes the agent's side.
func stuckAgent(t *testing.T) (ws *websocket.Conn, cut func()) {
	t.Helper()
	ws, agent := agentPair(t)
	var once sync.Once
	cut = func() { once.Do(func() { agent.Close() }) }
	t.Cleanup(cut)
	return ws, cut
}

// agentPair connects a link's side (ws) to a test's agent side (agent),
// on a unix socket; nothing reads either until the test does.
func agentPair(t *testing.T) (ws, agent *websocket.Conn) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan *websocket.Conn, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		conns <- c
	})}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-served })
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var nd net.Dialer
		nc, err := nd.DialContext(ctx, "unix", sock)
		if err != nil {
			return nil, err
		}
		return wire.NewTryConn(nc), nil // as the greeter dials: requests go out on the sender's goroutine
	}}
	ws, _, err = d.Dial("ws://agent"+wire.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case agent = <-conns:
	case <-time.After(waitFor):
		t.Fatal("no connection")
	}
	t.Cleanup(func() { agent.Close() })
	return ws, agent
}

// startLink starts a link for thread t1 on ws, stopped at the test's end.
func startLink(t *testing.T, ws *websocket.Conn) *agentlink.Link {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var group sync.WaitGroup
	link := agentlink.New(ctx, ws, agentlink.Config{
		ID: "t1", Thread: &fakeThread{}, Fleet: fakeFleet{}, Store: fakeStore{}, Server: ctx,
		Group: &group, LogEmpty: true,
	})
	link.Start()
	t.Cleanup(func() {
		link.Stop()
		cancel()
		done := make(chan struct{})
		go func() { group.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(waitFor):
			t.Error("the link's goroutines did not end")
		}
	})
	return link
}

// A sender finds the writer's queue full only while the agent takes
// nothing: it waits for room up to its wait (ErrAgentBusy), without a
// bound when it asked for none, until the agent connection ends
// (ErrAgentGone, and at once from then on).
func TestSendWaitsForAStuckAgent(t *testing.T) {
	ws, cut := stuckAgent(t)
	link := startLink(t, ws)
	big, _ := json.Marshal(strings.Repeat("x", 1<<20))
	request := func(i int) wire.Envelope {
		return wire.Envelope{Type: wire.TypePing, Thread: "t1", ID: "c1/p" + strconv.Itoa(i), Data: big}
	}
	var err error
	sent := 0
	for ; sent < 200; sent++ {
		if err = link.Send(request(sent), 50*time.Millisecond); err != nil {
			break
		}
	}
	// The queue's bound, and one more in the stuck write once the writer took it.
	if !errors.Is(err, agentlink.ErrAgentBusy) || sent < agentlink.RequestQueueLen || sent > agentlink.RequestQueueLen+1 {

		t.Fatalf("after %d requests of 1 MiB to an agent that reads nothing: %v, want ErrAgentBusy", sent, err)
	}
	waiting := make(chan error, 1)
	go func() { waiting <- link.Send(request(sent), 0) }()
	select {
	case err := <-waiting:
		t.Fatalf("a sender without a bound stopped waiting: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	cut()
	select {
	case err := <-waiting:
		if !errors.Is(err, agentlink.ErrAgentGone) {
			t.Fatalf("the waiting sender got %v, want ErrAgentGone", err)
		}
	case <-time.After(waitFor):
		t.Fatal("the waiting sender still waits after the agent connection ended")
	}
	if err := link.Send(request(sent+1), time.Second); !errors.Is(err, agentlink.ErrAgentGone) {
		t.Fatalf("a request after the connection ended: %v, want ErrAgentGone", err)
	}
	if err := link.SendInput([]byte{1}, time.Second); !errors.Is(err, agentlink.ErrAgentGone) {
		t.Fatalf("input after the connection ended: %v, want ErrAgentGone", err)
	}
}

// Requests from many senders at once, written on their own goroutines
// when the writer is idle (wire.Pump.TryKick) and by the writer when not:
// the agent gets each exactly once, every sender's in the order it sent
// them, and never two frames mixed.
func TestSendFromManySenders(t *testing.T) {
	ws, agent := agentPair(t)
	link := startLink(t, ws)
	const senders, each = 8, 300
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				env := wire.Envelope{Type: wire.TypePing, Thread: "t1", ID: "c" + strconv.Itoa(s) + "/" + strconv.Itoa(i)}
				if i%50 == 0 { // now and then one larger than the socket takes at once
					env.Data, _ = json.Marshal(strings.Repeat("y", 300<<10))
				}
				if err := link.Send(env, waitFor); err != nil {
					t.Errorf("sender %d, request %d: %v", s, i, err)
					return
				}
				if i%7 == 0 {
					time.Sleep(50 * time.Microsecond) // let the writer go idle
				}
			}
		})
	}
	next := make([]int, senders)
	for got := 0; got < senders*each; {
		_ = agent.SetReadDeadline(time.Now().Add(waitFor))
		var env wire.Envelope
		if err := agent.ReadJSON(&env); err != nil {
			t.Fatalf("agent read after %d requests: %v", got, err)
		}
		if env.Type == wire.TypeResume {
			continue
		}
		conn, id, _ := strings.Cut(env.ID, "/")
		s, _ := strconv.Atoi(strings.TrimPrefix(conn, "c"))
		if s < 0 || s >= senders {
			t.Fatalf("request %d: got %s %q from no sender", got, env.Type, env.ID)
		}
		if i, _ := strconv.Atoi(id); env.Type != wire.TypePing || i != next[s] {
			t.Fatalf("request %d: got %s %q, want c%d/%d", got, env.Type, env.ID, s, next[s])
		}
		next[s]++
		got++
	}
	wg.Wait()
}
