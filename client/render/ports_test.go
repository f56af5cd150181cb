package render_test

import (
	"bytes"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/render"
)

func TestPorts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ev   wire.Ports
		want string
	}{
		{"listening", wire.Ports{Ports: []wire.Port{{Port: 8000, Address: "127.0.0.1"}, {Port: 5173, Address: "::1"}}},
			"⇢ listening in the sandbox: 8000 (127.0.0.1), 5173 (::1) — client forward t_1 8000, or /v1/threads/t_1/ports/8000/ on the bridge\n"},
		{"none", wire.Ports{}, "⇢ nothing listens in the sandbox now\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			r := render.New(&buf, render.Options{Width: func() int { return 80 }})
			env := ev(wire.TypePorts, "", tc.ev)
			env.Thread = "t_1"
			if err := r.Render(env); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tc.want {
				t.Errorf("got %q, want %q", buf.String(), tc.want)
			}
		})
	}
}
