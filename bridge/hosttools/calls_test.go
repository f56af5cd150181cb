package hosttools_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/hosttools"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// calls is a thread's Calls over h whose answers arrive on the channel.
func calls(t *testing.T, h *hosttools.Host) (*hosttools.Calls, chan wire.Envelope, *sync.WaitGroup) {
	t.Helper()
	out := make(chan wire.Envelope, 16)
	var wg sync.WaitGroup
	c := &hosttools.Calls{Host: h, Thread: "t_1", Group: &wg,
		Scope: func(context.Context) hosttools.Scope { return hosttools.Scope{Thread: "t_1"} },
		Own:   func(context.Context) []wire.MCPServer { return []wire.MCPServer{{Name: "own"}} },
		Send:  func(env wire.Envelope) { out <- env }}
	return c, out, &wg
}

// answer is the next answer of type typ, skipping progress.
func answer[T any](t *testing.T, out chan wire.Envelope, typ wire.Type) (wire.Envelope, T) {
	t.Helper()
	for {
		env := testutil.RequireReceive(t, "an answer of type "+string(typ), out, 10*time.Second)
		if env.Type == wire.TypeHostProgress && typ != wire.TypeHostProgress {
			continue
		}
		var v T
		if env.Type != typ || env.Decode(&v) != nil {
			t.Fatalf("got %s %s; want %s", env.Type, env.Data, typ)
		}
		return env, v
	}
}

func TestCallsAnswerTheAgent(t *testing.T) {
	h, _ := newHost(t, "")
	c, out, wg := calls(t, h)
	dead := make(chan struct{})
	if c.Handle(context.Background(), dead, wire.MustNew(wire.TypeUserMessage, "t_1", "x", wire.Text{Text: "hi"})) {
		t.Fatal("Handle took a message that is not a host tool one")
	}
	c.Handle(context.Background(), dead, wire.MustNew(wire.TypeHostToolsList, "t_1", "r1", struct{}{}))
	env, list := answer[wire.HostTools](t, out, wire.TypeHostTools)
	if env.ID != "r1" || len(list.Tools) == 0 || len(list.MCPServers) != 1 || list.MCPServers[0].Name != "own" {
		t.Fatalf("the list: %s %+v", env.ID, list)
	}
	c.Handle(context.Background(), dead, wire.MustNew(wire.TypeHostCall, "t_1", "r2", wire.HostCall{CallID: "c1", Name: "t_echo", Arguments: []byte(`{"text":"hi"}`)}))
	if env, res := answer[wire.HostResult](t, out, wire.TypeHostResult); env.ID != "r2" || res.Output != "echo: hi" {
		t.Fatalf("the call: %s %+v", env.ID, res)
	}
	c.Handle(context.Background(), dead, wire.MustNew(wire.TypeHostCall, "t_1", "r3", wire.HostCall{}))
	if _, res := answer[wire.HostResult](t, out, wire.TypeHostResult); !strings.HasPrefix(res.Error, "bad host_call") {
		t.Fatalf("a call without a name: %+v", res)
	}
	wg.Wait()
}

// A hanging call ends when the agent cancels it, when its agent
// connection ends and when the thread ends; each time the Group empties.
func TestCallsCancelled(t *testing.T) {
	h, _ := newHost(t, "")
	for _, how := range []string{"host_cancel", "agent connection ended", "thread ended"} {
		t.Run(how, func(t *testing.T) {
			c, out, wg := calls(t, h)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			dead := make(chan struct{})
			c.Handle(ctx, dead, wire.MustNew(wire.TypeHostCall, "t_1", "r1", wire.HostCall{CallID: "c1", Name: "t_hang", Arguments: []byte(`{}`)}))
			time.Sleep(100 * time.Millisecond) // not needed for the outcome: the call is under way or not yet
			switch how {
			case "host_cancel":
				c.Handle(ctx, dead, wire.MustNew(wire.TypeHostCancel, "t_1", "r1", struct{}{}))
			case "agent connection ended":
				close(dead)
			default:
				cancel()
			}
			if _, res := answer[wire.HostResult](t, out, wire.TypeHostResult); !strings.HasPrefix(res.Error, "cancelled") {
				t.Fatalf("the cancelled call: %+v", res)
			}
			testutil.RequireReceive(t, "the calls' goroutines end", waitCh(wg), 10*time.Second)
		})
	}
}

// waitCh receives once wg is done.
func waitCh(wg *sync.WaitGroup) chan struct{} {
	ch := make(chan struct{}, 1)
	go func() { wg.Wait(); ch <- struct{}{} }()
	return ch
}

// Without host tools a call is answered, and a list has the thread's own
// servers only.
func TestCallsWithoutHost(t *testing.T) {
	c, out, wg := calls(t, nil)
	c.Handle(context.Background(), nil, wire.MustNew(wire.TypeHostToolsList, "t_1", "r1", struct{}{}))
	if _, list := answer[wire.HostTools](t, out, wire.TypeHostTools); len(list.Tools) != 0 || len(list.MCPServers) != 1 {
		t.Fatalf("the list: %+v", list)
	}
	c.Handle(context.Background(), nil, wire.MustNew(wire.TypeHostCall, "t_1", "r2", wire.HostCall{CallID: "c", Name: "x"}))
	if _, res := answer[wire.HostResult](t, out, wire.TypeHostResult); res.Error != "this bridge has no host tools" {
		t.Fatalf("the call: %+v", res)
	}
	wg.Wait()
}
