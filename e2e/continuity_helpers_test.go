package e2e_test

import (
	"context"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// continuityScript answers the continuity scenarios: a number and a color
// to remember (the number also goes into /workspace/n) and questions about
// them.
const continuityScript = `{"model":"scripted","turns":[
  {"when":"remember the number","steps":[
    {"content":"Writing it down.","tool_calls":[{"name":"execute","arguments":{"command":"echo 42 > /workspace/n"}}]},
    {"content":"Noted: the number is 42."}
  ]},
  {"when":"my color is","steps":[{"content":"Noted: the color is blue."}]},
  {"when":"which number","steps":[{"content":"It was 42."}]},
  {"when":"which color","steps":[{"content":"It was blue."}]},
  {"steps":[{"content":"ok"}]}
]}`

// replacedBy waits on s for sandbox_exited then sandbox_replaced, both
// with reason, and returns the replacement.
func (s *session) replacedBy(reason wire.ExitReason) wire.SandboxReplaced {
	s.t.Helper()
	var ex wire.SandboxExited
	mustDecode(s.t, s.awaitEvent(wire.TypeSandboxExited), &ex)
	if ex.Reason != reason {
		s.t.Fatalf("sandbox_exited %+v, want reason %s", ex, reason)
	}
	var rep wire.SandboxReplaced
	mustDecode(s.t, s.awaitEvent(wire.TypeSandboxReplaced), &rep)
	if rep.Reason != reason || rep.SandboxID == "" {
		s.t.Fatalf("sandbox_replaced %+v, want reason %s", rep, reason)
	}
	return rep
}

// lastChatHas reports whether the model's newest chat request has a user
// message containing each of want and none containing any of not; it also
// returns the request's messages for failure messages.
func (e *env) lastChatHas(want, not []string) (bool, string) {
	reqs := e.llm.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		msgs := reqs[i].Chat.Messages
		if len(msgs) == 0 {
			continue
		}
		var users, all []string
		for _, m := range msgs {
			all = append(all, m.Role+":"+m.Content)
			if m.Role == "user" {
				users = append(users, m.Content)
			}
		}
		has := func(s string) bool {
			return slices.ContainsFunc(users, func(u string) bool { return strings.Contains(u, s) })
		}
		ok := !slices.ContainsFunc(not, has)
		for _, w := range want {
			ok = ok && has(w)
		}
		return ok, strings.Join(all, " | ")
	}
	return false, "no chat request"
}

// threadInfo is GET /v1/threads/{id}.
func (e *env) threadInfo(id string) wire.ThreadInfo {
	e.t.Helper()
	var info wire.ThreadInfo
	if code := e.api(http.MethodGet, "/v1/threads/"+id, nil, &info); code != http.StatusOK {
		e.t.Fatalf("GET thread %s: %d", id, code)
	}
	return info
}

// imageID is the id the engine gives ref now.
func imageID(t *testing.T, ref string) string {
	t.Helper()
	out, err := exec.Command("docker", "image", "inspect", "-f", "{{.Id}}", ref).CombinedOutput()
	if err != nil {
		t.Fatalf("docker image inspect %s: %v %s", ref, err, out)
	}
	return strings.TrimSpace(string(out))
}

// testTag tags image as a new reference of its own for this test and
// removes the tag (and the images built under it) when the test ends —
// after the sandboxes went, if the test registers it before cleanAtEnd.
func testTag(t *testing.T) string {
	t.Helper()
	tag := "boxwire-e2e-update:" + randHex(6)
	if out, err := exec.Command("docker", "tag", image, tag).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("docker", "rmi", tag).CombinedOutput(); err != nil {
			t.Errorf("docker rmi %s: %v %s", tag, err, out)
		}
	})
	return tag
}

// rebuild builds a trivial new layer on tag, under the same tag: what
// shipping an agent update looks like to the bridge. It returns the new id.
func rebuild(t *testing.T, tag string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "build", "-q", "-t", tag, "-")
	cmd.Stdin = strings.NewReader("FROM " + tag + "\nLABEL boxwire.e2e.rebuild=" + randHex(6) + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v %s", err, out)
	}
	return imageID(t, tag)
}
