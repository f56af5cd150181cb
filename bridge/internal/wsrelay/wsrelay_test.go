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

// Dial sends the hello with the client's credential (its Authorization
// and a session cookie, as the caller gives them), and nothing else of
// the header, to the relay's WebSocket path.
func TestDial(t *testing.T) {
	t.Parallel()
	var up websocket.Upgrader
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != wire.Path || r.Header.Get("Authorization") != "Bearer k" || r.Header.Get("Cookie") != "session=x" || r.Header.Get("X-Other") != "" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		if typ, data, err := c.ReadMessage(); err == nil { // echo the hello
			_ = c.WriteMessage(typ, data)
		}
	}))
	defer relay.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := http.Header{"Authorization": {"Bearer k"}, "Cookie": {"session=x"}, "X-Other": {"y"}}
	c, err := wsrelay.Dial(ctx, relay.URL, h, wire.MustNew(wire.TypeHello, "t_1", "h", wire.Hello{Version: wire.Version, Thread: "t_1"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, data, err := c.ReadMessage(); err != nil || !strings.Contains(string(data), `"type":"hello"`) || !strings.Contains(string(data), `"t_1"`) {
		t.Fatalf("the relay's echo of the hello: %q %v", data, err)
	}
}

func TestDialRefused(t *testing.T) {
	t.Parallel()
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer relay.Close()
	_, err := wsrelay.Dial(context.Background(), relay.URL, http.Header{}, wire.Envelope{})
	var re *wsrelay.RefusedError
	if !errors.As(err, &re) || re.Status != http.StatusUnauthorized || !strings.Contains(err.Error(), "401") {
		t.Fatalf("dial a refusing relay: %v, want its 401", err)
	}
}
