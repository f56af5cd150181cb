package clientmsg_test

import (
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/internal/clientmsg"
	"github.com/boxwire/boxwire/bridge/wire"
)

func TestRefusal(t *testing.T) {
	t.Parallel()
	cases := []struct {
		typ  wire.Type
		code wire.Code // "": passed on
		msg  string
	}{
		{wire.TypeUserMessage, "", ""},
		{wire.TypePing, "", ""},
		{wire.TypeHistory, wire.CodeNotAllowed, "history is sent only by the bridge"},
		{wire.TypeClaim, wire.CodeNotAllowed, "claim is between the agent and the bridge"},
		{wire.TypeClaimed, wire.CodeNotAllowed, "is between the agent and the bridge"},
		{wire.TypeResume, wire.CodeNotAllowed, "resume is between the agent and the bridge"},
		{wire.TypeResumed, wire.CodeNotAllowed, "is between the agent and the bridge"},
		{wire.TypeHello, wire.CodeBadMessage, "hello was already exchanged"},
		{wire.TypeTurnDone, wire.CodeBadMessage, "turn_done is not a request"},
		{"no_such_type", wire.CodeUnknownType, `unknown message type "no_such_type"`},
	}
	for _, tc := range cases {
		env := wire.Envelope{Type: tc.typ, ID: "m1"}
		got, refused := clientmsg.Refusal("t_1", env)
		if refused != (tc.code != "") {
			t.Errorf("%s: refused %v, want %v", tc.typ, refused, tc.code != "")
			continue
		}
		if !refused {
			continue
		}
		var werr wire.Error
		if err := got.Decode(&werr); err != nil || got.Type != wire.TypeError || got.Thread != "t_1" || got.ID != "m1" {
			t.Fatalf("%s: answer %+v (%v)", tc.typ, got, err)
		}
		if werr.Code != tc.code || !strings.Contains(werr.Message, tc.msg) {
			t.Errorf("%s: %s %q, want %s %q", tc.typ, werr.Code, werr.Message, tc.code, tc.msg)
		}
	}
}
