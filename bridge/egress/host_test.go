package egress_test

import (
	"testing"

	"github.com/boxwire/boxwire/bridge/egress"
)

// TestNormalize lists the ways a host can be written and what each must
// become (or that it must be refused).
func TestNormalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string // host:port, "" = refused
	}{
		{"example.com:443", "example.com:443"},
		{"EXAMPLE.com:443", "example.com:443"},
		{"example.com.:443", "example.com:443"},
		{"ｅｘａｍｐｌｅ.com:443", "example.com:443"},    // fullwidth letters
		{"example。com:443", "example.com:443"},    // ideographic full stop
		{"bücher.de:443", "xn--bcher-kva.de:443"}, // IDNA
		{"xn--bcher-kva.de:443", "xn--bcher-kva.de:443"},
		{"BÜCHER.de:443", "xn--bcher-kva.de:443"},
		{"example.com", ""},   // CONNECT needs a port
		{"example.com:", ""},  // empty port
		{"example.com:0", ""}, // port 0
		{"example.com:65536", ""},
		{"example.com:0443", ""}, // leading zero
		{"example.com:+443", ""},
		{"example.com:443abc", ""},
		{"example.com:443:443", ""},
		{"user@example.com:443", ""},
		{"allowed.com@evil.com:443", ""},
		{"evil.com#allowed.com:443", ""},
		{"evil.com/allowed.com:443", ""},
		{"evil.com\\allowed.com:443", ""},
		{"evil%2ecom:443", ""},
		{"evil.com%00.allowed.com:443", ""},
		{"evil.com\x00.allowed.com:443", ""},
		{"evil .com:443", ""},
		{"example..com:443", ""},
		{".example.com:443", ""},
		{"example.com..:443", ""},
		{"-example.com:443", ""},
		{"exa_mple.com:443", ""},
		{"127.0.0.1:80", "127.0.0.1:80"},
		{"[::1]:80", "[::1]:80"},
		{"[::ffff:127.0.0.1]:80", "127.0.0.1:80"},
		{"[fe80::1%eth0]:80", ""},
		{"::1:80", ""},
		{"[127.0.0.1]:80", ""},
		{"2130706433:80", ""}, // decimal IPv4
		{"0x7f000001:80", ""}, // hex IPv4
		{"0x7f.0.0.1:80", ""}, // mixed forms
		{"127.1:80", ""},      // short form
		{"0177.0.0.1:80", ""}, // octal
		{"127.0.0.01:80", ""}, // leading zero
		{"1.2.3.4.5:80", ""},  // numeric last label
		{"a.b.c.123:80", ""},  // numeric TLD
		{"", ""},
		{":443", ""},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := egress.Normalize(tc.in, 0)
			switch {
			case tc.want == "" && err == nil:
				t.Fatalf("Normalize(%q) = %s, want refusal", tc.in, got)
			case tc.want != "" && err != nil:
				t.Fatalf("Normalize(%q): %v, want %s", tc.in, err, tc.want)
			case tc.want != "" && got.String() != tc.want:
				t.Fatalf("Normalize(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestNormalizeDefaultPort(t *testing.T) {
	t.Parallel()
	got, err := egress.Normalize("Example.COM", 80)
	if err != nil || got.String() != "example.com:80" {
		t.Fatalf("got %s, %v", got, err)
	}
	got, err = egress.Normalize("[::1]", 80)
	if err != nil || got.String() != "[::1]:80" {
		t.Fatalf("got %s, %v", got, err)
	}
}

func TestRules(t *testing.T) {
	t.Parallel()
	rules, err := egress.ParseRules([]string{"pypi.org", "*.github.com", ".golang.org", "api.example.com:8443", "127.0.0.1:9000", "[::1]:9001"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		target string
		rule   string // "" = refused
	}{
		{"pypi.org:443", "pypi.org"},
		{"PyPI.org.:80", "pypi.org"},
		{"pypi.org:8080", ""},
		{"files.pypi.org:443", ""},
		{"evilpypi.org:443", ""},
		{"pypi.org.evil.com:443", ""},
		{"raw.github.com:443", "*.github.com"},
		{"a.b.github.com:443", "*.github.com"},
		{"github.com:443", ""},
		{"evilgithub.com:443", ""},
		{"golang.org:443", ".golang.org"},
		{"proxy.golang.org:443", ".golang.org"},
		{"api.example.com:8443", "api.example.com:8443"},
		{"api.example.com:443", ""},
		{"127.0.0.1:9000", "127.0.0.1:9000"},
		{"127.0.0.1:9001", ""},
		{"[::1]:9001", "[::1]:9001"},
		{"[::ffff:127.0.0.1]:9000", "127.0.0.1:9000"},
		{"localhost:9000", ""},
	}
	for _, tc := range tests {
		tg, err := egress.Normalize(tc.target, 0)
		if err != nil {
			t.Fatalf("normalize %s: %v", tc.target, err)
		}
		r, ok := rules.Match(tg)
		if ok != (tc.rule != "") || r.Text != tc.rule {
			t.Errorf("%s matched %q (%v), want %q", tc.target, r.Text, ok, tc.rule)
		}
	}
	for _, bad := range []string{"*.127.0.0.1", "exa mple.com", "a.com:0", "user@a.com", "*.", "2130706433"} {
		if _, err := egress.ParseRules([]string{bad}); err == nil {
			t.Errorf("rule %q accepted", bad)
		}
	}
}
