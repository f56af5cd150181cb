package wsrelay_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/internal/wsrelay"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

func TestAdvertised(t *testing.T) {
	t.Parallel()
	cases := []struct{ advertise, listening, want string }{
		{"https://b1.example", "http://127.0.0.1:8080", "https://b1.example"},
		{"", "http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"", "https://[::1]:8443", "https://[::1]:8443"},
		{"", "http://0.0.0.0:8080", ""},
		{"", "http://[::]:8080", ""},
		{"", "http://:8080", ""},
	}
	for _, c := range cases {
		if got := wsrelay.Advertised(c.advertise, c.listening); got != c.want {
			t.Errorf("Advertised(%q, %q) = %q, want %q", c.advertise, c.listening, got, c.want)
		}
	}
}

type bridges []store.Bridge

func (b bridges) Bridges(context.Context) ([]store.Bridge, error) {
	if b == nil {
		return nil, errors.New("store down")
	}
	return b, nil
}

func TestAddress(t *testing.T) {
	t.Parallel()
	bs := bridges{{ID: "b1", Address: "http://10.0.0.1:8080"}, {ID: "b2"}}
	for id, want := range map[string]string{"b1": "http://10.0.0.1:8080", "b2": "", "b3": ""} {
		if got, err := wsrelay.Address(context.Background(), bs, id); err != nil || got != want {
			t.Errorf("Address(%s) = %q, %v; want %q", id, got, err, want)
		}
	}
	if _, err := wsrelay.Address(context.Background(), bridges(nil), "b1"); err == nil || !strings.Contains(err.Error(), "store down") {
		t.Errorf("Address with a failing store: %v", err)
	}
}

// Dial sends the hello with the client's credential; Splice copies text
// and binary messages both ways and passes the relay's close code on.
func TestDialAndSplice(t *testing.T) {
	t.Parallel()
	var up websocket.Upgrader
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != wire.Path || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for { // echo, until "bye": then close 4000
			typ, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			if string(data) == "bye" {
				_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4000, "done"), time.Now().Add(time.Second))
				return
			}
			_ = c.WriteMessage(typ, data)
		}
	}))
	defer relay.Close()

	// The front: a client's connection spliced to the relay.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		upc, err := wsrelay.Dial(r.Context(), relay.URL, r.Header, wire.MustNew(wire.TypeHello, "", "h", wire.Hello{Version: wire.Version}))
		if err != nil {
			c.Close()
			t.Errorf("dial: %v", err)
			return
		}
		wsrelay.Splice(context.Background(), c, upc)
	}))
	defer front.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := http.Header{"Authorization": {"Bearer k"}}
	c, _, err := websocket.DefaultDialer.DialContext(ctx, "ws"+strings.TrimPrefix(front.URL, "http"), h)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, data, err := c.ReadMessage(); err != nil || !strings.Contains(string(data), `"type":"hello"`) {
		t.Fatalf("the relay's echo of the hello: %q %v", data, err)
	}
	for _, m := range []struct {
		typ  int
		data string
	}{{websocket.TextMessage, "text"}, {websocket.BinaryMessage, "\x00bin"}} {
		if err := c.WriteMessage(m.typ, []byte(m.data)); err != nil {
			t.Fatal(err)
		}
		if typ, data, err := c.ReadMessage(); err != nil || typ != m.typ || string(data) != m.data {
			t.Fatalf("echo: %d %q %v, want %d %q", typ, data, err, m.typ, m.data)
		}
	}
	if err := c.WriteMessage(websocket.TextMessage, []byte("bye")); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4000 || ce.Text != "done" {
		t.Fatalf("close passed on: %v, want 4000 done", err)
	}
}

func TestDialRefused(t *testing.T) {
	t.Parallel()
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer relay.Close()
	_, err := wsrelay.Dial(context.Background(), relay.URL, http.Header{}, wire.Envelope{})
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("dial a refusing relay: %v, want its 401", err)
	}
}

// Splice ends, closing both connections, when its ctx ends.
func TestSpliceEndsWithItsContext(t *testing.T) {
	t.Parallel()
	var up websocket.Upgrader
	quiet := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	}))
	defer quiet.Close()
	ctx, cancel := context.WithCancel(context.Background())
	spliced := make(chan struct{})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		upc, err := wsrelay.Dial(r.Context(), quiet.URL, r.Header, wire.Envelope{})
		if err != nil {
			c.Close()
			t.Errorf("dial: %v", err)
			return
		}
		wsrelay.Splice(ctx, c, upc)
		close(spliced)
	}))
	defer front.Close()
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(front.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cancel()
	select {
	case <-spliced:
	case <-time.After(30 * time.Second):
		t.Fatal("Splice did not return after its context ended")
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, _, err := c.ReadMessage(); err == nil {
		t.Fatal("the client's connection is still open")
	}
}
