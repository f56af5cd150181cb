package render_test

import (
	"bytes"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/render"
)

func TestEgressRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		ev    wire.EgressRules
		color bool
		want  string
	}{
		{"set", wire.EgressRules{Rules: []string{".pythonhosted.org", "pypi.org"}, By: wire.EgressByAPI},
			false, "⇄ egress rules set by api: .pythonhosted.org pypi.org\n"},
		{"replaced", wire.EgressRules{Rules: []string{"pypi.org"}, Previous: []string{"api.example.com", "x.test:8443"}, By: wire.EgressByAPI},
			false, "⇄ egress rules set by api: pypi.org (were: api.example.com x.test:8443)\n"},
		{"removed", wire.EgressRules{Rules: []string{}, Previous: []string{"pypi.org"}, By: wire.EgressByAPI},
			false, "⇄ egress rules removed by api (were: pypi.org)\n"},
		{"no one named", wire.EgressRules{}, false, "⇄ egress rules removed by unknown\n"},
		{"bold in color", wire.EgressRules{Rules: []string{"pypi.org"}, By: wire.EgressByAPI},
			true, "\x1b[1m⇄ egress rules set by api: pypi.org\x1b[0m\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			r := render.New(&buf, render.Options{Color: tc.color, Width: func() int { return 80 }})
			if err := r.Render(ev(wire.TypeEgressRules, "", tc.ev)); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tc.want {
				t.Errorf("got %q, want %q", buf.String(), tc.want)
			}
		})
	}
	t.Run("mid-line", func(t *testing.T) { // the notice starts on a line of its own
		var buf bytes.Buffer
		r := render.New(&buf, render.Options{Width: func() int { return 80 }})
		_ = r.Render(ev(wire.TypeAssistantDelta, "m1", wire.Text{Text: "work"}))
		if err := r.Render(ev(wire.TypeEgressRules, "", wire.EgressRules{Rules: []string{"pypi.org"}, By: "api"})); err != nil {
			t.Fatal(err)
		}
		if want := "work\n⇄ egress rules set by api: pypi.org\n"; !bytes.HasSuffix(buf.Bytes(), []byte(want)) {
			t.Errorf("got %q, want it to end with %q", buf.String(), want)
		}
	})
}
