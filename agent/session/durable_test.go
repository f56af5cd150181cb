package session_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// A request a bridge sends again (after a restart or a reconnect) with an
// id the thread already accepted is answered accepted and not run twice;
// a client may use an id again and is not deduplicated.
func TestRepeatedRequestAccepted(t *testing.T) {
	runTool := func(id string) wire.Envelope {
		return wire.MustNew(wire.TypeRunTool, "", id, wire.RunTool{Name: "echo", Arguments: []byte(`{"x":1}`)})
	}
	for _, tc := range []struct {
		name   string
		role   string
		req    func(id string) wire.Envelope
		last   wire.Type // the request's last event
		twice  bool      // the repeated request runs again
		models int       // model calls after both requests and m2
	}{
		{"user_message from a bridge", wire.RoleBridge, func(id string) wire.Envelope { return userMessage(id, "hi") }, wire.TypeTurnDone, false, 2},
		{"run_tool from a bridge", wire.RoleBridge, runTool, wire.TypeToolResult, false, 1},
		{"user_message from a client", wire.RoleClient, func(id string) wire.Envelope { return userMessage(id, "hi") }, wire.TypeTurnDone, true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakeModel{}
			e := newEnv(t, session.Config{Loop: loop.Config{Model: model, Tools: []tools.Tool{echoTool()}}})
			const id = "c1~ab12.1/m1"
			first, h := e.helloAs(tc.role, "t")
			if tc.role == wire.RoleBridge {
				first.resume(wire.Resume{})
			}
			first.send(tc.req(id))
			last, _ := first.await(tc.last)
			first.ws.Close()

			again, _ := e.helloAs(tc.role, "t")
			if tc.role == wire.RoleBridge {
				if r := again.resume(wire.Resume{Instance: h.Instance, After: last.Seq}); r.Replayed != 0 {
					t.Fatalf("resumed %+v", r)
				}
			}
			again.send(tc.req(id))
			if !tc.twice {
				if got := again.next(); got.Type != wire.TypeAccepted || got.ID != id || got.Seq != 0 {
					t.Fatalf("repeated request answered %s id %q seq %d %s", got.Type, got.ID, got.Seq, got.Data)
				}
			} else {
				again.await(tc.last)
			}
			again.send(userMessage("c1~ab12.2/m2", "next"))
			ev, _ := again.await(wire.TypeUserEcho)
			if want := last.Seq + 1; !tc.twice && (ev.Seq != want || ev.ID != "c1~ab12.2/m2") {
				t.Fatalf("next turn starts at seq %d id %q, want %d: the repeated request ran", ev.Seq, ev.ID, want)
			}
			again.await(wire.TypeTurnDone)
			if n := len(model.requests()); n != tc.models {
				t.Fatalf("%d model calls, want %d", n, tc.models)
			}
		})
	}
}

// resumed says what the agent is running as of the replay's end: a turn
// and its tool call, a run_tool's call, nothing once they ended.
func TestResumedReportsWork(t *testing.T) {
	for _, tc := range []struct {
		name  string
		req   wire.Envelope
		turn  bool
		calls []string
	}{
		{"turn running a tool", userMessage("b/m1", "wait"), true, []string{"w1"}},
		{"run_tool", wire.MustNew(wire.TypeRunTool, "", "b/r1", wire.RunTool{Name: "wait", Arguments: []byte(`{}`)}), false, []string{"run_1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan struct{})
			model := &fakeModel{steps: []step{{calls: []loop.ToolCall{{ID: "w1", Name: "wait"}}}}}
			e := newEnv(t, session.Config{Loop: loop.Config{Model: model, Tools: []tools.Tool{waitTool(started)}}})
			b, h := e.helloAs(wire.RoleBridge, "t")
			if r := b.resume(wire.Resume{}); r.Busy || r.Turn || len(r.Calls) > 0 || r.Seq != 0 {
				t.Fatalf("idle agent resumed %+v", r)
			}
			b.send(tc.req)
			if tc.turn {
				chk, _ := b.await(wire.TypeToolCheck)
				b.send(wire.MustNew(wire.TypeToolVerdict, "", chk.ID, wire.ToolVerdict{Allowed: true}))
			}
			select {
			case <-started:
			case <-time.After(waitFor):
				t.Fatal("the tool never started")
			}
			b2, _ := e.helloAs(wire.RoleBridge, "t")
			r := b2.resume(wire.Resume{Instance: h.Instance})
			if !r.Busy || r.Turn != tc.turn || !slices.Equal(r.Calls, tc.calls) || r.Seq != uint64(r.Replayed) || r.Seq == 0 {
				t.Fatalf("busy agent resumed %+v", r)
			}
			b2.send(wire.Envelope{Type: wire.TypeInterrupt})
			b.await(wire.TypeToolResult)
			if tc.turn {
				b.await(wire.TypeTurnDone)
			}
			b3, _ := e.helloAs(wire.RoleBridge, "t")
			if r := b3.resume(wire.Resume{Instance: h.Instance}); r.Busy || r.Turn || len(r.Calls) > 0 {
				t.Fatalf("agent resumed %+v after the work ended", r)
			}
		})
	}
}

// A tool check of a turn that reached its tool call while a bridge was
// connecting waits for the bridge's resume: the bridge gets resumed, the
// replay with the tool_call, then tool_check — never the check first.
func TestToolCheckFollowsResumed(t *testing.T) {
	var runs atomicCount
	model := &fakeModel{steps: []step{{calls: []loop.ToolCall{{ID: "c1", Name: "echo", Arguments: `{}`}}}, {text: "done"}}}
	e := newEnv(t, session.Config{Loop: loop.Config{Model: model, Tools: []tools.Tool{runs.tool()}}})
	watcher := e.dial("t")
	b, h := e.helloAs(wire.RoleBridge, "t") // hello only: resume comes later
	watcher.send(userMessage("m1", "go"))
	watcher.await(wire.TypeToolCall)
	time.Sleep(200 * time.Millisecond) // a check sent too early would be queued on b by now

	b.send(wire.MustNew(wire.TypeResume, "", "rs", wire.Resume{Instance: h.Instance}))
	var order []string
	for {
		env := b.next()
		switch {
		case env.Type == wire.TypeResumed:
			order = append(order, "resumed")
		case env.Type == wire.TypeToolCall && slices.Contains(order, "resumed"):
			order = append(order, "tool_call")
		case env.Type == wire.TypeToolCheck:
			order = append(order, "tool_check")
			b.send(wire.MustNew(wire.TypeToolVerdict, "", env.ID, wire.ToolVerdict{Allowed: true}))
		}
		if env.Type == wire.TypeToolCheck {
			break
		}
	}
	if want := []string{"resumed", "tool_call", "tool_check"}; !slices.Equal(order, want) {
		t.Fatalf("the bridge got %v, want %v", order, want)
	}
	watcher.await(wire.TypeTurnDone)
	if n := runs.n.Load(); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
}

// atomicCount counts the runs of its echo tool.
type atomicCount struct{ n atomic.Int32 }

func (a *atomicCount) tool() fakeTool { return countingEcho(&a.n) }
