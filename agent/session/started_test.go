package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// quiet is how long a test watches for what must not happen yet.
const quiet = 200 * time.Millisecond

// inbox reads c's messages on a goroutine of its own (a timed-out read
// would end a gorilla connection), until the connection fails.
func inbox(c *client) <-chan wire.Envelope {
	ch := make(chan wire.Envelope, 16)
	go func() {
		defer close(ch)
		for {
			env, err := c.read()
			if err != nil {
				return
			}
			ch <- env
		}
	}()
	return ch
}

// receive returns the next message from in, failing the test after waitFor.
func receive(t *testing.T, in <-chan wire.Envelope) wire.Envelope {
	t.Helper()
	select {
	case env, ok := <-in:
		if !ok {
			t.Fatal("the connection ended")
		}
		return env
	case <-time.After(waitFor):
		t.Fatal("no message")
		return wire.Envelope{}
	}
}

// none fails the test when a message comes within quiet.
func none(t *testing.T, in <-chan wire.Envelope, what string) {
	t.Helper()
	select {
	case env := <-in:
		t.Fatalf("%s: got %s %s", what, env.Type, env.Data)
	case <-time.After(quiet):
	}
}

// The hello and a ping are answered before the agent's start is complete
// (Config.Started), the hello with the hash AgentHash gives; a request
// that can start a process waits for the start: a run_tool sent before it
// runs only once Started is closed, and what comes after it waits too.
func TestCommandsWaitForTheStart(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	ran := make(chan struct{}, 1)
	mark := fakeTool{name: "mark", run: func(context.Context, tools.Call) tools.Result {
		ran <- struct{}{}
		return tools.Result{Output: "ran"}
	}}
	e := newEnv(t, session.Config{
		Started: started, AgentHash: func() string { return "sha256:ab" },
		Loop: loop.Config{Model: &fakeModel{}, Tools: []tools.Tool{mark}},
	})
	c, _, err := e.dialRaw(nil)
	if err != nil {
		t.Fatal(err)
	}
	in := inbox(c)
	c.send(wire.MustNew(wire.TypeHello, "", "h", wire.Hello{Version: wire.Version, Role: wire.RoleClient, Thread: "t"}))
	answer := receive(t, in)
	if answer.Type != wire.TypeHello {
		t.Fatalf("answered %s %s", answer.Type, answer.Data)
	}
	if hello := decode[wire.Hello](t, answer); hello.AgentHash != "sha256:ab" {
		t.Fatalf("hello %+v: want agent_hash sha256:ab", hello)
	}
	c.send(wire.MustNew(wire.TypePing, "", "p1", nil))
	if pong := receive(t, in); pong.Type != wire.TypePong || pong.ID != "p1" {
		t.Fatalf("answered %s %s to a ping", pong.Type, pong.ID)
	}

	c.send(runTool("r1", "mark", `{}`))
	c.send(wire.MustNew(wire.TypePing, "", "p2", nil)) // behind the run_tool
	none(t, in, "before the start was complete")
	select {
	case <-ran:
		t.Fatal("a tool ran before the start was complete")
	default:
	}
	close(started)
	select {
	case <-ran:
	case <-time.After(waitFor):
		t.Fatal("the tool did not run once the start was complete")
	}
	var pong, result bool
	for !pong || !result {
		switch env := receive(t, in); env.Type {
		case wire.TypePong:
			pong = true
		case wire.TypeToolResult:
			if r := decode[wire.ToolResult](t, env); r.Error != "" || r.Output != "ran" {
				t.Fatalf("run_tool result %+v", r)
			}
			result = true
		}
	}
}

// A terminal_open sent before the start is complete is served only after
// it (no terminal's shell starts before the thread reserve); a
// terminal_list is answered at once.
func TestTerminalWaitsForTheStart(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	e := newEnv(t, session.Config{Started: started, Loop: loop.Config{Model: &fakeModel{}, Workspace: t.TempDir()}})
	c := e.dial("")
	in := inbox(c)
	c.send(wire.MustNew(wire.TypeTerminalList, "", "l1", nil))
	if list := receive(t, in); list.Type != wire.TypeTerminalSessions {
		t.Fatalf("answered %s %s to terminal_list", list.Type, list.Data)
	}
	c.send(wire.MustNew(wire.TypeTerminalOpen, "", "o1", wire.TerminalOpen{Command: []string{"sleep", "30"}}))
	none(t, in, "terminal_open before the start was complete")
	close(started)
	if att := receive(t, in); att.Type != wire.TypeTerminalAttached {
		t.Fatalf("answered %s %s to terminal_open", att.Type, att.Data)
	}
}

// Config.Greeted is called once, after the first hello was answered: not
// on a connection that has not said hello, not again for a later hello.
func TestGreetedOnceAfterTheFirstHello(t *testing.T) {
	t.Parallel()
	greeted := make(chan struct{}, 4)
	e := newEnv(t, session.Config{
		Greeted: func() { greeted <- struct{}{} },
		Loop:    loop.Config{Model: &fakeModel{}},
	})
	c, _, err := e.dialRaw(nil)
	if err != nil {
		t.Fatal(err)
	}
	in := inbox(c)
	select {
	case <-greeted:
		t.Fatal("greeted before any hello")
	case <-time.After(quiet):
	}
	c.send(wire.MustNew(wire.TypeHello, "", "h", wire.Hello{Version: wire.Version, Role: wire.RoleClient, Thread: "t"}))
	if answer := receive(t, in); answer.Type != wire.TypeHello {
		t.Fatalf("answered %s %s", answer.Type, answer.Data)
	}
	select {
	case <-greeted:
	case <-time.After(waitFor):
		t.Fatal("not greeted after the first hello")
	}
	e.dial("t") // a second connection's hello
	select {
	case <-greeted:
		t.Fatal("greeted again after a second hello")
	case <-time.After(quiet):
	}
}
