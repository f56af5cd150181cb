package forward_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/forward"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// emptyStore is a thread's log with no events, and a store no one else
// commits to.
type emptyStore struct{}

func (emptyStore) Events(string, uint64, int) ([]wire.Envelope, error) { return nil, nil }
func (emptyStore) LastSeq(string) (uint64, error)                      { return 0, nil }
func (emptyStore) Listen(ctx context.Context, _ func(store.Notice)) error {
	<-ctx.Done()
	return ctx.Err()
}

// takeover is the bridge's Relays while it takes the thread over: the
// first time the forwarded client asks where its thread is relayed, the
// lease is this bridge's but the thread not started here yet (""), and
// the takeover finishes right after the answer; from then on the thread
// is relayed here, at own. (Before Address answered ErrNoAddress, the
// client then asked whether the thread was relayed here, found it was,
// and closed itself as moved.)
type takeover struct {
	own string

	mu   sync.Mutex
	here bool
}

func (r *takeover) Address(context.Context, string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.here {
		r.here = true // the takeover finishes as the answer leaves
		return "", nil
	}
	return r.own, nil
}

// relay is a bridge relaying the thread: it answers each dial's hello
// with its own and reports the dial; drop ends the connections it has.
type relay struct {
	*httptest.Server
	dialled chan wire.Hello

	mu    sync.Mutex
	conns []*websocket.Conn
}

func newRelay(t *testing.T) *relay {
	r := &relay{dialled: make(chan wire.Hello, 4)}
	var up websocket.Upgrader
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		conn, err := up.Upgrade(w, req, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		env, hello := readHello(t, conn)
		if err := conn.WriteJSON(wire.MustNew(wire.TypeHello, hello.Thread, env.ID,
			wire.Hello{Version: wire.Version, Role: wire.RoleBridge, Thread: hello.Thread})); err != nil {
			return
		}
		r.mu.Lock()
		r.conns = append(r.conns, conn)
		r.mu.Unlock()
		r.dialled <- hello
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
		}
	}))
	t.Cleanup(r.Close)
	return r
}

// drop ends the relay's connections without a close frame, as a killed
// bridge's end.
func (r *relay) drop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		_ = c.NetConn().Close()
	}
}

func readHello(t *testing.T, conn *websocket.Conn) (wire.Envelope, wire.Hello) {
	var env wire.Envelope
	var hello wire.Hello
	_, data, err := conn.ReadMessage()
	if err == nil {
		err = json.Unmarshal(data, &env)
	}
	if err == nil {
		err = env.Decode(&hello)
	}
	if err != nil {
		t.Errorf("read a hello: %v", err)
	}
	return env, hello
}

// A forwarded client whose relay dies while this bridge takes the thread
// over keeps its connection: when the bridge first finds no address (the
// lease is its own, the thread not started yet) and the thread is
// relayed here a moment later, it asks again and dials its own address,
// rather than closing the client as moved (a close the e2e fail-over test
// saw once: a forwarded client detached at the takeover).
func TestForwardedClientStaysThroughTakeover(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, own := newRelay(t), newRelay(t)
	relays := &takeover{own: own.URL}
	hub := forward.NewHub(ctx, forward.Config{Store: emptyStore{}, Listener: emptyStore{}, Relays: relays,
		Limits: forward.Limits{WriteWait: time.Second, PongWait: 30 * time.Second, PingPeriod: 10 * time.Second,
			HelloTimeout: 5 * time.Second, ReadLimit: 1 << 20, SendBuffer: 16, Batch: 16},
		Enter: func() bool { return true }, Done: func() {}})
	var served sync.WaitGroup
	var up websocket.Upgrader
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		served.Add(1)
		defer served.Done()
		env, hello := readHello(t, conn)
		c := hub.NewClient(conn, hello, env.ID, r.Header, nil)
		upstream, err := c.Dial(r.Context(), first.URL)
		if err != nil {
			t.Errorf("dial the first relay: %v", err)
			conn.Close()
			return
		}
		hub.Serve(c, upstream)
	}))
	defer front.Close()

	client, _, err := websocket.DefaultDialer.DialContext(ctx, "ws"+strings.TrimPrefix(front.URL, "http")+wire.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.WriteJSON(wire.MustNew(wire.TypeHello, "", "h1",
		wire.Hello{Version: wire.Version, Role: wire.RoleClient, Thread: "t_takeover"})); err != nil {
		t.Fatal(err)
	}
	<-first.dialled
	ended := make(chan error, 1)
	go func() { // the client reads until its connection ends
		for {
			if _, _, err := client.ReadMessage(); err != nil {
				ended <- err
				return
			}
		}
	}()
	first.drop()
	select {
	case h := <-own.dialled:
		if h.Thread != "t_takeover" {
			t.Errorf("the client's hello to its new relay names thread %q", h.Thread)
		}
	case err := <-ended:
		t.Fatalf("the forwarded client's connection ended at the takeover: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the bridge did not dial its own address for the client")
	}
	select {
	case err := <-ended:
		t.Fatalf("the forwarded client's connection ended after the takeover: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	client.Close()
	served.Wait()
}
