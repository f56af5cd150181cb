package threadlog_test

import (
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/threadlog"
	"github.com/boxwire/boxwire/bridge/wire"
)

func TestNumberAndTail(t *testing.T) {
	t.Parallel()
	l := threadlog.New(10, 1<<10)
	for i := 0; i < 3; i++ {
		env := l.Number(wire.MustNew(wire.TypeAssistantMessage, "t", "", wire.Text{Text: "x"}))
		if want := uint64(11 + i); env.Seq != want {
			t.Fatalf("seq %d, want %d", env.Seq, want)
		}
		l.Add(env)
	}
	if got := l.Committed(); got != 13 {
		t.Fatalf("committed %d, want 13", got)
	}
	evs, ok := l.FromTail(11, 10)
	if !ok || len(evs) != 2 || evs[0].Seq != 12 {
		t.Fatalf("FromTail(11) = %v, %v", evs, ok)
	}
	if _, ok := l.FromTail(5, 10); ok {
		t.Fatal("FromTail before the tail reports ok")
	}
	if evs, ok := l.FromTail(13, 10); !ok || len(evs) != 0 {
		t.Fatalf("FromTail(committed) = %v, %v", evs, ok)
	}
	if h := l.Head(1); len(h) != 1 || h[0].Seq != 11 {
		t.Fatalf("Head(1) = %v", h)
	}
}

func TestForStoreCapsACallsOutput(t *testing.T) {
	t.Parallel()
	l := threadlog.New(0, 8)
	out := func(s string) wire.ToolOutput {
		var o wire.ToolOutput
		env := l.ForStore(wire.MustNew(wire.TypeToolOutput, "t", "m1", wire.ToolOutput{CallID: "c1", Output: s}))
		if err := env.Decode(&o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	if o := out("12345"); o.Output != "12345" {
		t.Fatalf("under the cap: %q", o.Output)
	}
	if o := out("67890"); !strings.Contains(o.Output, "not kept") {
		t.Fatalf("past the cap: %q, want the marker", o.Output)
	}
	if o := out("more"); o.Output != "" {
		t.Fatalf("after the marker: %q, want empty", o.Output)
	}
	l.Forget(wire.MustNew(wire.TypeToolResult, "t", "m1", wire.ToolResult{CallID: "c1"}))
	if o := out("again"); o.Output != "again" {
		t.Fatalf("after the result: %q", o.Output)
	}
}

func TestBusy(t *testing.T) {
	t.Parallel()
	l := threadlog.New(0, 1<<10)
	add := func(typ wire.Type, data any) {
		l.Add(l.Number(wire.MustNew(typ, "t", "m1", data)))
	}
	if l.Busy() {
		t.Fatal("a new log is busy")
	}
	add(wire.TypeUserEcho, wire.Text{Text: "hi"})
	add(wire.TypeToolCall, wire.ToolCall{CallID: "c1", Name: "execute"})
	add(wire.TypeTurnDone, wire.TurnDone{})
	if !l.Busy() {
		t.Fatal("an open call is not busy")
	}
	add(wire.TypeToolResult, wire.ToolResult{CallID: "c1"})
	if l.Busy() {
		t.Fatal("busy after the call's result and the turn's end")
	}
	// The agent's account, with every published event committed, holds at once.
	l.Resumed(wire.Resumed{Busy: true})
	if !l.Busy() {
		t.Fatal("the agent says it is busy; the log does not")
	}
}
