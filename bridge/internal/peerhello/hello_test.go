package peerhello_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/internal/peerhello"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// TestRead: a hello is read with its envelope; everything else a peer may
// send first is a wire.Error of the right code; silence is a read error
// after the timeout.
func TestRead(t *testing.T) {
	t.Parallel()
	good := wire.MustNew(wire.TypeHello, "", "h1", wire.Hello{Version: wire.Version, Role: wire.RoleClient, Thread: "t_1"})
	old := wire.MustNew(wire.TypeHello, "", "h2", wire.Hello{Version: wire.Version + 1})
	cases := []struct {
		name  string
		frame string // "" sends nothing
		code  wire.Code
	}{
		{"hello", string(mustMarshal(t, good)), ""},
		{"not hello", `{"type":"ping","id":"p"}`, wire.CodeBadMessage},
		{"other version", string(mustMarshal(t, old)), wire.CodeVersionMismatch},
		{"error", `{"type":"error","data":{"code":"unauthorized","message":"no"}}`, wire.CodeUnauthorized},
		{"too large", `{"type":"hello","data":{"software":"` + strings.Repeat("x", wire.MaxMessageBytes) + `"}}`, wire.CodeTooLarge},
		{"silence", "", ""},
	}
	for _, c := range cases {
		got := make(chan error, 1)
		var h wire.Hello
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
			if err != nil {
				got <- err
				return
			}
			defer conn.Close()
			var rerr error
			h, _, rerr = peerhello.Read(conn, 300*time.Millisecond)
			got <- rerr
		}))
		conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.frame != "" {
			if err := conn.WriteMessage(websocket.TextMessage, []byte(c.frame)); err != nil {
				t.Fatal(err)
			}
		}
		rerr := testutil.RequireReceive(t, c.name+": Read returning", got, 10*time.Second)
		conn.Close()
		srv.Close()
		var werr wire.Error
		switch {
		case c.name == "hello":
			if rerr != nil || h.Thread != "t_1" {
				t.Errorf("hello: %+v %v", h, rerr)
			}
		case c.name == "silence":
			if rerr == nil || errors.As(rerr, &werr) {
				t.Errorf("silence: %v, want a read error", rerr)
			}
		case !errors.As(rerr, &werr) || werr.Code != c.code:
			t.Errorf("%s: %v, want code %s", c.name, rerr, c.code)
		}
	}
}

func mustMarshal(t *testing.T, env wire.Envelope) []byte {
	t.Helper()
	b, err := wire.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
