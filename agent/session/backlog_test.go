package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/agent/tools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// floodEnv is an agent whose model calls a tool printing chunks chunks of
// size bytes; done is closed when the tool has printed them all.
func floodEnv(t *testing.T, chunks, size int) (e *env, done chan struct{}) {
	done = make(chan struct{})
	flood := fakeTool{name: "flood", run: func(_ context.Context, c tools.Call) tools.Result {
		chunk := []byte(strings.Repeat("z", size))
		for range chunks {
			c.Output(chunk)
		}
		close(done)
		return tools.Result{Output: "flooded"}
	}}
	model := &fakeModel{steps: []step{{calls: []loop.ToolCall{{ID: "f", Name: "flood"}}}}}
	return newEnv(t, session.Config{Loop: loop.Config{Model: model, Tools: []tools.Tool{flood}}}), done
}

// helloAs connects with role and returns the connection and the hello
// answer.
func (e *env) helloAs(role, thread string) (*client, wire.Hello) {
	e.t.Helper()
	c, _, err := e.dialRaw(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	c.send(wire.MustNew(wire.TypeHello, "", "h", wire.Hello{Version: wire.Version, Role: role, Thread: thread}))
	got := c.next()
	if got.Type != wire.TypeHello {
		e.t.Fatalf("handshake answered %s %s", got.Type, got.Data)
	}
	return c, decode[wire.Hello](e.t, got)
}

// resume asks for the backlog after r and returns the resumed answer;
// live events before it are skipped, as the bridge drops them.
func (c *client) resume(r wire.Resume) wire.Resumed {
	c.t.Helper()
	c.send(wire.MustNew(wire.TypeResume, "", "rs", r))
	got := c.next()
	for got.Seq > 0 {
		got = c.next()
	}
	if got.Type != wire.TypeResumed || got.ID != "rs" {
		c.t.Fatalf("resume answered %s id %q %s", got.Type, got.ID, got.Data)
	}
	return decode[wire.Resumed](c.t, got)
}

// untilTurnDone reads through turn_done, checking seqs are contiguous.
func untilTurnDone(t *testing.T, c *client, first uint64) []wire.Envelope {
	t.Helper()
	var evs []wire.Envelope
	for {
		env := c.next()
		if env.Seq != first+uint64(len(evs)) {
			t.Fatalf("event %d is %s seq %d, want seq %d", len(evs), env.Type, env.Seq, first+uint64(len(evs)))
		}
		evs = append(evs, env)
		if env.Type == wire.TypeTurnDone {
			return evs
		}
	}
}

// A bridge that attaches with a resume point gets resumed and the events
// after it (the instance must match; otherwise everything held), then live
// events: what the thread made while no bridge was attached is not lost.
func TestBridgeResumeReplaysBacklog(t *testing.T) {
	e, _ := floodEnv(t, 3, 16)
	c, h := e.helloAs(wire.RoleClient, "t")
	if h.Instance == "" {
		t.Fatal("hello answer names no instance")
	}
	c.send(userMessage("m1", "go"))
	all := untilTurnDone(t, c, 1)
	last := all[len(all)-1].Seq
	for _, tc := range []struct {
		name      string
		resume    wire.Resume
		wantAfter uint64
	}{
		{"same instance", wire.Resume{Instance: h.Instance, After: 2}, 2},
		{"same instance, all seen", wire.Resume{Instance: h.Instance, After: last}, last},
		{"other instance", wire.Resume{Instance: "restarted", After: 2}, 0},
		{"no instance", wire.Resume{}, 0},
		{"cursor past the numbering", wire.Resume{Instance: h.Instance, After: last + 9}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := e.helloAs(wire.RoleBridge, "t")
			defer b.ws.Close()
			r := b.resume(tc.resume)
			if r.Instance != h.Instance || r.After != tc.wantAfter || r.Replayed != int(last-tc.wantAfter) {
				t.Fatalf("resumed %+v, want after %d, %d replayed", r, tc.wantAfter, last-tc.wantAfter)
			}
			for seq := tc.wantAfter + 1; seq <= last; seq++ {
				if got := b.next(); got.Seq != seq || got.Type != all[seq-1].Type {
					t.Fatalf("replayed %s seq %d, want %s seq %d", got.Type, got.Seq, all[seq-1].Type, seq)
				}
			}
			b.send(wire.MustNew(wire.TypePing, "", "p", nil))
			if got := b.next(); got.Type != wire.TypePong {
				t.Fatalf("after the replay got %s seq %d, want pong", got.Type, got.Seq)
			}
		})
	}
}

// Events the backlog no longer holds are named by events_lost, with the
// seq of the last lost one, before the replay: never silently skipped.
func TestBridgeResumePastBacklog(t *testing.T) {
	const chunks, size = 3000, 4096 // 12 MiB: more than the backlog keeps
	e, done := floodEnv(t, chunks, size)
	c, _ := e.helloAs(wire.RoleClient, "t")
	c.send(userMessage("m1", "go"))
	c.ws.Close() // nobody watches: the turn goes on
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("the flood did not end")
	}
	b, _ := e.helloAs(wire.RoleBridge, "t")
	r := b.resume(wire.Resume{})
	lostEnv := b.next()
	if lostEnv.Type != wire.TypeEventsLost {
		t.Fatalf("after resumed got %s, want events_lost", lostEnv.Type)
	}
	lost := decode[wire.EventsLost](t, lostEnv)
	if lost.From != 1 || lost.To != lostEnv.Seq || lost.Count != lost.To || lost.Count == 0 {
		t.Fatalf("events_lost seq %d %+v", lostEnv.Seq, lost)
	}
	evs := untilTurnDone(t, b, lost.To+1)
	bytes := 0
	for _, ev := range evs {
		bytes += len(ev.Data)
	}
	if r.Replayed > len(evs) || bytes > 8<<20 {
		t.Fatalf("resumed %+v; %d events, %d bytes after the loss", r, len(evs), bytes)
	}
	t.Logf("lost %d events; replayed %d (%d KiB)", lost.Count, len(evs), bytes>>10)
}

// A reply does not wait behind queued events: a bridge that lets a flood
// queue up and then pings gets the pong ahead of the queue.
func TestReplyAheadOfQueuedEvents(t *testing.T) {
	e, _ := floodEnv(t, 3000, 4096)
	b, _ := e.helloAs(wire.RoleBridge, "t")
	b.resume(wire.Resume{})
	b.send(userMessage("m1", "go"))
	check, _ := b.await(wire.TypeToolCheck)
	b.send(wire.MustNew(wire.TypeToolVerdict, "", check.ID, wire.ToolVerdict{Allowed: true}))
	time.Sleep(300 * time.Millisecond) // the queue fills while nobody reads
	b.send(wire.MustNew(wire.TypePing, "", "p", nil))
	for n := 0; ; n++ {
		env := b.next()
		if env.Type == wire.TypePong {
			// Only what was already in the socket's buffers may come first;
			// the queue behind it holds up to 1024 events.
			if n >= 512 {
				t.Fatalf("pong after %d events", n)
			}
			t.Logf("pong after %d events", n)
			break
		}
		if env.Type == wire.TypeTurnDone {
			t.Fatal("turn_done before the pong")
		}
	}
	if _, seen := b.await(wire.TypeTurnDone); len(seen) == 0 {
		t.Fatal("no turn_done")
	}
}

// Only a bridge may ask for the backlog.
func TestResumeOnlyFromBridge(t *testing.T) {
	e, _ := floodEnv(t, 1, 1)
	c, _ := e.helloAs(wire.RoleClient, "t")
	c.send(wire.MustNew(wire.TypeResume, "", "rs", wire.Resume{}))
	expectError(t, c.next(), wire.CodeNotAllowed, "rs")
}

// A bridge connection that dies while a flood waits for room on it frees
// the thread: the next bridge resumes and gets every event once.
func TestBridgeDiesDuringFloodNextResumes(t *testing.T) {
	const chunks = 1500 // 6 MiB: well over the send queue, under the backlog
	e, _ := floodEnv(t, chunks, 4096)
	b1, h := e.helloAs(wire.RoleBridge, "t")
	b1.resume(wire.Resume{})
	b1.send(userMessage("m1", "go"))
	check, _ := b1.await(wire.TypeToolCheck)
	b1.send(wire.MustNew(wire.TypeToolVerdict, "", check.ID, wire.ToolVerdict{Allowed: true}))
	time.Sleep(300 * time.Millisecond) // the flood waits for room on b1
	b1.ws.Close()

	b2, _ := e.helloAs(wire.RoleBridge, "t")
	if r := b2.resume(wire.Resume{Instance: h.Instance}); r.After != 0 {
		t.Fatalf("resumed %+v", r)
	}
	evs := untilTurnDone(t, b2, 1)
	n := 0
	for _, ev := range evs {
		if ev.Type == wire.TypeToolOutput {
			n++
		}
	}
	if n != chunks {
		t.Fatalf("the second bridge got %d of %d chunks", n, chunks)
	}
}
