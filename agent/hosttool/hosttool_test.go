package hosttool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/agent/hosttool"
	"github.com/boxwire/boxwire/agent/tool"
	"github.com/boxwire/boxwire/bridge/wire"
)

// caller answers from a function and records the calls.
type caller struct {
	calls  []wire.HostCall
	answer func(progress func(string)) (wire.HostResult, error)
}

func (c *caller) Call(_ context.Context, call wire.HostCall, progress func(string)) (wire.HostResult, error) {
	c.calls = append(c.calls, call)
	return c.answer(progress)
}

func TestTools(t *testing.T) {
	c := &caller{}
	ts := hosttool.Tools([]wire.HostTool{
		{Name: "gh_search", Description: "Search.", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
		{Name: "", Description: "no name"},
		{Name: "bad_schema", InputSchema: json.RawMessage(`"not an object"`)},
	}, c, 20)
	if len(ts) != 2 || ts[0].Name() != "gh_search" || ts[0].Description() != "Search." {
		t.Fatalf("tools %v", ts)
	}
	if p := string(ts[1].Parameters()); p != `{"type":"object","properties":{}}` {
		t.Errorf("a schema that is not an object: %s", p)
	}
	for _, tc := range []struct {
		name   string
		answer func(progress func(string)) (wire.HostResult, error)
		check  func(tool.Result, string) bool
	}{
		{"result and progress", func(p func(string)) (wire.HostResult, error) {
			p("working")
			return wire.HostResult{Output: "found"}, nil
		}, func(r tool.Result, out string) bool {
			return r.Output == "found" && r.Err == "" && out == "working\r\n"
		}},
		{"tool error", func(func(string)) (wire.HostResult, error) {
			return wire.HostResult{Output: "no", Error: "the tool reported an error: no"}, nil
		}, func(r tool.Result, _ string) bool { return r.Err == "the tool reported an error: no" }},
		{"bridge gone", func(func(string)) (wire.HostResult, error) {
			return wire.HostResult{}, errors.New("the bridge connection closed")
		}, func(r tool.Result, _ string) bool {
			return r.Err == "host tool gh_search: the bridge connection closed"
		}},
		{"cut and redacted", func(func(string)) (wire.HostResult, error) {
			return wire.HostResult{Output: strings.Repeat("é", 15), Redacted: 2}, nil
		}, func(r tool.Result, _ string) bool {
			return r.Truncated && r.TotalBytes == 30 && strings.Contains(r.Output, "[host tool output cut at 20 of 30 bytes]") &&
				strings.HasSuffix(r.Output, "[boxwire: 2 secret(s) in this result were replaced by [REDACTED]]")
		}},
	} {
		c.answer = tc.answer
		var out strings.Builder
		r := ts[0].Run(context.Background(), tool.Call{ID: "call_1", Args: json.RawMessage(`{"q":"x"}`), Output: func(b []byte) { out.Write(b) }})
		if !tc.check(r, out.String()) {
			t.Errorf("%s: %+v, output %q", tc.name, r, out.String())
		}
	}
	if last := c.calls[len(c.calls)-1]; last.CallID != "call_1" || last.Name != "gh_search" || string(last.Arguments) != `{"q":"x"}` {
		t.Errorf("the call sent: %+v", last)
	}
}
