package mcpclient_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/internal/mcpclient"
)

func TestParse(t *testing.T) {
	servers, err := mcpclient.Parse([]byte(`{"servers":[
		{"name":"docs","prefix":"docs_","command":["/usr/local/bin/docs-mcp","--stdio"],"env":{"A":"b"},"dir":"/opt","tools":["search","read_*"],"timeout":"1m"},
		{"name":"other","command":["x"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 2 || servers[0].Name != "docs" || servers[0].CallTimeout != time.Minute || servers[0].Env["A"] != "b" ||
		servers[1].CallTimeout != mcpclient.DefaultTimeout {
		t.Errorf("parsed %+v", servers)
	}
	for _, raw := range []string{"", "  \n"} {
		if s, err := mcpclient.Parse([]byte(raw)); s != nil || err != nil {
			t.Errorf("%q: %v %v, want none", raw, s, err)
		}
	}
}

// TestParseErrors: every broken declaration is refused with an error
// naming the server and the field.
func TestParseErrors(t *testing.T) {
	many := strings.Repeat(`{"name":"a","command":["x"]},`, mcpclient.MaxServers)
	for _, tc := range []struct{ raw, want string }{
		{`[]`, "not an MCP servers declaration"},
		{`{"servers":[]} {}`, "more after its JSON object"},
		{`{"servers":[{"name":"a"}]}`, `server 1 ("a"): command: the program is missing`},
		{`{"servers":[{"name":"a","command":[""]}]}`, "command: the program is missing"},
		{`{"servers":[{"name":"a b","command":["x"]}]}`, "name must be"},
		{`{"servers":[{"name":"a","command":["x"],"url":"http://h"}]}`, `unknown field "url"`},
		{`{"servers":[{"name":"a","command":["x"],"timeout":"-1s"}]}`, `timeout "-1s"`},
		{`{"servers":[{"name":"a","command":["x"],"tools":["["]}]}`, `tools: "[" is not a glob`},
		{`{"servers":[{"name":"a","command":["x"],"prefix":"a.b"}]}`, `prefix "a.b"`},
		{`{"servers":[{"name":"a","command":["x"]},{"name":"a","command":["y"]}]}`, `server 2: the name "a" is used twice`},
		{`{"servers":[` + many + `{"name":"b","command":["x"]}]}`, fmt.Sprintf("at most %d", mcpclient.MaxServers)},
	} {
		if _, err := mcpclient.Parse([]byte(tc.raw)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.80s: %v, want %q", tc.raw, err, tc.want)
		}
	}
}

func TestMatchAny(t *testing.T) {
	for _, tc := range []struct {
		globs []string
		v     string
		want  bool
	}{
		{nil, "anything", true},
		{[]string{"read_*"}, "read_file", true},
		{[]string{"read_*", "search"}, "search", true},
		{[]string{"read_*"}, "write", false},
		{[]string{"boxwire:*"}, "reg/boxwire:x", false}, // * does not cross /
	} {
		if got := mcpclient.MatchAny(tc.globs, tc.v); got != tc.want {
			t.Errorf("MatchAny(%q, %q) = %v", tc.globs, tc.v, got)
		}
	}
}

// TestNames: a server's name is 1-64 and a prefix 0-32 ASCII letters,
// digits, _ or -.
func TestNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a", true}, {"A-z_09", true}, {strings.Repeat("n", 64), true},
		{"", false}, {strings.Repeat("n", 65), false}, {"a b", false}, {"a\n", false}, {"é", false}, {"a.b", false},
	} {
		if err := mcpclient.CheckName(tc.name); (err == nil) != tc.ok {
			t.Errorf("CheckName(%q): %v", tc.name, err)
		}
	}
	for _, tc := range []struct {
		prefix string
		ok     bool
	}{
		{"", true}, {"docs_", true}, {strings.Repeat("p", 32), true}, {strings.Repeat("p", 33), false}, {"a/b", false},
	} {
		if _, err := mcpclient.CheckOffer(tc.prefix, ""); (err == nil) != tc.ok {
			t.Errorf("CheckOffer(%q): %v", tc.prefix, err)
		}
	}
}
