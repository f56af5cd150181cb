package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// mcpListPrefix marks the fake agent's host_tools_list; the rest of its id
// is the user message's, with "/" as "|".
const mcpListPrefix = "htl_"

// mcpAnswer: the user message "mcp servers" has the fake agent ask its
// bridge host_tools_list, as the real agent does at a turn's start; the
// answer's MCP servers become the turn's text ("none" for none).
func (a *fakeAgent) mcpAnswer(env wire.Envelope) ([]wire.Envelope, bool) {
	switch env.Type {
	case wire.TypeUserMessage:
		var m wire.UserMessage
		if env.Decode(&m) != nil || m.Text != "mcp servers" {
			return nil, false
		}
		return []wire.Envelope{a.event(wire.TypeUserEcho, env.ID, m),
			wire.MustNew(wire.TypeHostToolsList, "", mcpListPrefix+strings.ReplaceAll(env.ID, "/", "|"), nil)}, true
	case wire.TypeHostTools:
		rest, ok := strings.CutPrefix(env.ID, mcpListPrefix)
		if !ok {
			return nil, false
		}
		id := strings.ReplaceAll(rest, "|", "/")
		var list wire.HostTools
		_ = env.Decode(&list)
		var names []string
		for _, s := range list.MCPServers {
			names = append(names, s.Name+"="+strings.Join(s.Command, " "))
		}
		text := strings.Join(names, ",")
		if text == "" {
			text = "none"
		}
		return []wire.Envelope{a.event(wire.TypeAssistantMessage, id, wire.Text{Text: text}),
			a.event(wire.TypeTurnDone, id, wire.TurnDone{Reason: wire.ReasonStop})}, true
	}
	return nil, false
}

// TestThreadMCPServers: a thread's MCP servers (CreateThread.MCP) are
// checked before anything is made — a broken declaration is a 400
// bad_message naming the server and field — kept with the thread, and
// handed to its agent in every host_tools answer; a thread without any
// gets none.
func TestThreadMCPServers(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ mcp, want string }{
		{`{"servers":[{"name":"docs"}]}`, `mcp: server 1 ("docs"): command: the program is missing`},
		{`{"servers":[{"name":"docs","command":["x"],"secret":"y"}]}`, `unknown field "secret"`},
		{`{"servers":[{"name":"a","command":["x"]},{"name":"a","command":["y"]}]}`, `the name "a" is used twice`},
		{`["not an object"]`, "not an MCP servers declaration"},
	} {
		code, _, werr := e.createThread(`{"mcp":` + tc.mcp + `}`)
		if code != http.StatusBadRequest || werr.Code != wire.CodeBadMessage || !strings.Contains(werr.Message, tc.want) {
			t.Errorf("mcp %s: %d %+v, want 400 bad_message %q", tc.mcp, code, werr, tc.want)
		}
	}
	if live, _, _, _ := e.mgr.State(); live != 0 {
		t.Fatalf("%d sandboxes after refused requests, want 0", live)
	}

	code, info, werr := e.createThread(`{"mcp":{"servers":[{"name":"docs","prefix":"docs_","command":["/usr/local/bin/docs-mcp","--stdio"]},{"name":"web","command":["web-mcp"]}]}}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %+v", code, werr)
	}
	s, _ := e.attach(info.ID, 0)
	if text := assistantText(s.turn("m1", "mcp servers")); text != "docs=/usr/local/bin/docs-mcp --stdio,web=web-mcp" {
		t.Errorf("the agent was handed %q", text)
	}
	s2, _ := e.attach("", 0) // a thread of the bridge's defaults
	if text := assistantText(s2.turn("m2", "mcp servers")); text != "none" {
		t.Errorf("a thread without MCP servers was handed %q", text)
	}
}

// assistantText is the text of the first assistant_message in events.
func assistantText(events []wire.Envelope) string {
	for _, ev := range events {
		var m wire.Text
		if ev.Type == wire.TypeAssistantMessage && ev.Decode(&m) == nil {
			return m.Text
		}
	}
	return ""
}
