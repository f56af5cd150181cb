package egress_test

import (
	"testing"

	"github.com/boxwire/boxwire/bridge/egress"
)

func mustRule(t *testing.T, text string) egress.Rule {
	t.Helper()
	rs, err := egress.ParseRules([]string{text})
	if err != nil || len(rs) != 1 {
		t.Fatalf("parse %q: %v", text, err)
	}
	return rs[0]
}

// TestCanonical checks that every spelling of a rule has one canonical
// text, and that the text parses back to the same rule.
func TestCanonical(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"Example.COM.", "example.com"},
		{"example.com:8443", "example.com:8443"},
		{"*.Example.com", "*.example.com"},
		{".example.com:443", ".example.com:443"},
		{"bücher.example", "xn--bcher-kva.example"},
		{"127.0.0.1:8080", "127.0.0.1:8080"},
		{"[::1]:8080", "[::1]:8080"},
		{"[::ffff:127.0.0.1]:80", "127.0.0.1:80"},
		{"[::1]", "[::1]"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			r := mustRule(t, tc.in)
			if got := r.Canonical(); got != tc.want {
				t.Fatalf("Canonical(%q) = %q, want %q", tc.in, got, tc.want)
			}
			back := mustRule(t, r.Canonical())
			if back.Canonical() != r.Canonical() || back.Host != r.Host || back.Suffix != r.Suffix ||
				back.Apex != r.Apex || back.IP != r.IP || len(back.Ports) != len(r.Ports) {
				t.Fatalf("%q reads back as %+v, not %+v", r.Canonical(), back, r)
			}
		})
	}
}

// TestWithin checks which rules a cap rule covers: never more hosts,
// ports or address kinds than it allows itself.
func TestWithin(t *testing.T) {
	t.Parallel()
	cases := []struct {
		rule, max string
		within    bool
	}{
		{"example.com", "example.com", true},
		{"example.com:443", "example.com", true},
		{"example.com:8443", "example.com", false},
		{"example.com", "example.com:443", false},
		{"api.example.com", "example.com", false},
		{"example.com", "api.example.com", false},
		{"api.example.com", "*.example.com", true},
		{"a.b.example.com:80", "*.example.com", true},
		{"example.com", "*.example.com", false},
		{"example.com", ".example.com", true},
		{"*.example.com", "*.example.com", true},
		{"*.api.example.com", "*.example.com", true},
		{".api.example.com", "*.example.com", true},
		{".example.com", "*.example.com", false},
		{".example.com", ".example.com", true},
		{"*.example.com", "example.com", false},
		{".example.com", ".example.com:443", false},
		{"badexample.com", ".example.com", false},
		{"*.badexample.com", "*.example.com", false},
		{"127.0.0.1:8080", "127.0.0.1:8080", true},
		{"127.0.0.1:8081", "127.0.0.1:8080", false},
		{"127.0.0.2:8080", "127.0.0.1:8080", false},
		{"[::1]:8080", "[::1]:8080", true},
		{"localhost:8080", "127.0.0.1:8080", false},
		{"api.example.com", ".com", true},
	}
	for _, tc := range cases {
		t.Run(tc.rule+" in "+tc.max, func(t *testing.T) {
			r, m := mustRule(t, tc.rule), mustRule(t, tc.max)
			if got := r.Within(m); got != tc.within {
				t.Fatalf("%q within %q = %v, want %v", tc.rule, tc.max, got, tc.within)
			}
			if got := (egress.Rules{mustRule(t, "other.example"), m}).Covers(r); got != tc.within {
				t.Fatalf("Covers = %v, want %v", got, tc.within)
			}
		})
	}
	if (egress.Rules{}).Covers(mustRule(t, "example.com")) {
		t.Fatal("an empty cap covers nothing")
	}
}
