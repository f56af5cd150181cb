package fleet_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// claimLog is a Config.ClaimShared that records the boxes it was asked
// for and refuses them while refuse is set.
type claimLog struct {
	mu     sync.Mutex
	boxes  []string
	refuse bool
}

func (c *claimLog) claim(_ context.Context, box string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.boxes = append(c.boxes, box)
	if c.refuse {
		return fleet.ErrRelayedElsewhere
	}
	return nil
}

func (c *claimLog) asked() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.boxes)
}

// A shared sandbox whose last thread a bridge lets go (another bridge
// took its lease) leaves that bridge's fleet and keeps running; the bridge
// that takes it over (TakeOverShared) adopts it once, after claiming its
// threads' leases — not while the claim is refused — serves its proxies,
// and greets its agent with its own LLM token; no new thread of the
// assistant joins it, and it is removed once its last thread leaves.
func TestTakeOverShared(t *testing.T) {
	a := newFleet(t, nil)
	shared := wire.CreateThread{Scope: wire.ScopeAssistant, Assistant: "helper"}
	box, _ := a.acquire("t1", shared)
	if err := a.f.LetGo(box, "t1"); err != nil {
		t.Fatal(err)
	}
	if live, _, removed, _ := a.mgr.State(); live != 1 || len(removed) != 0 {
		t.Fatalf("after LetGo: %d live, removed %v; want the shared sandbox running", live, removed)
	}
	if again, _ := a.acquire("t2", shared); again.ID() == box.ID() {
		t.Fatal("a new thread joined the shared box its bridge let go of")
	}

	claims := &claimLog{refuse: true}
	b := newFleet(t, func(c *fleet.Config) {
		c.Manager, c.BridgeID, c.ClaimShared, c.ReapInterval = a.mgr, "bridge-b", claims.claim, 50*time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.f.TakeOverShared(ctx, box.ID(), "other"); !errors.Is(err, fleet.ErrNoSandbox) {
		t.Fatalf("take over the box for another assistant: %v, want ErrNoSandbox", err)
	}
	if _, err := b.f.TakeOverShared(ctx, box.ID(), "helper"); !errors.Is(err, fleet.ErrRelayedElsewhere) {
		t.Fatalf("take over while the claim is refused: %v, want ErrRelayedElsewhere", err)
	}
	claims.mu.Lock()
	claims.refuse = false
	claims.mu.Unlock()
	taken, err := b.f.TakeOverShared(ctx, box.ID(), "helper")
	if err != nil {
		t.Fatal(err)
	}
	same, err := b.f.TakeOverShared(ctx, box.ID(), "helper") // a second thread's join finds it
	if err != nil || same != taken || taken.ID() != box.ID() || taken.SandboxID() != box.SandboxID() {
		t.Fatalf("took over %v and %v (%v); want box %s with sandbox %s once", taken, same, err, box.ID(), box.SandboxID())
	}
	if got := claims.asked(); len(got) != 2 || got[1] != box.ID() {
		t.Fatalf("ClaimShared asked for %v; want %s refused, then once", got, box.ID())
	}
	conn, _, err := b.f.Rejoin(ctx, taken, "t1")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := a.claims(box.SandboxID()); len(got) == 0 || got[len(got)-1] != taken.LLMToken() {
		t.Fatalf("the agent's tokens %v; want bridge-b's last", got)
	}
	m := &member{id: "t1"}
	if err := b.f.Attach(taken, m); err != nil {
		t.Fatal(err)
	}
	b.f.Started(taken)
	b.f.Started(taken)
	if other, _ := b.acquire("t3", shared); other.ID() == box.ID() {
		t.Fatal("a new thread of the assistant joined the sandbox taken over from another bridge")
	}

	b.f.Release(taken, "t1")
	testutil.Eventually(t, "the taken-over sandbox removed once its last thread left", 10*time.Second, func() bool {
		_, _, removed, _ := a.mgr.State()
		return slices.Contains(removed, box.SandboxID())
	})
}

// A suspended thread's box is made again under its name only once the
// box's stopped sandboxes are gone, whichever bridge made them (their
// volume stays); one that still runs refuses the resume with
// sandbox_unavailable rather than the engine's name conflict.
func TestResumeClearsTheBoxName(t *testing.T) {
	t.Parallel()
	e := newFleet(t, nil)
	ctx := context.Background()
	leftover := func(box, assistant string) string {
		sb, err := e.mgr.Create(ctx, sandbox.Spec{Name: "boxwire-" + box, AgentDir: t.TempDir(), Labels: map[string]string{
			sandbox.LabelBox: box, sandbox.LabelScope: string(wire.ScopeAssistant), sandbox.LabelAssistant: assistant, sandbox.LabelOwner: "bridge-other"}})
		if err != nil {
			t.Fatal(err)
		}
		return sb.ID
	}
	at := time.Now().UTC()
	suspended := func(id, box, assistant string) fleet.ThreadRecord {
		return fleet.ThreadRecord{ID: id, Box: box, Scope: wire.ScopeAssistant, Assistant: assistant, Suspended: &at}
	}
	stopped := leftover("a_stopped", "helper")
	e.mgr.Kill(stopped, 137, false)
	b, conn, err := e.f.Acquire(ctx, e.f.ResumeOptions(suspended("t1", "a_stopped", "helper")), "t1")
	if err != nil {
		t.Fatalf("resume beside a stopped sandbox of the box: %v", err)
	}
	conn.Close()
	e.f.Started(b)
	if _, _, removed, _ := e.mgr.State(); !slices.Contains(removed, stopped) || b.ID() != "a_stopped" || b.SandboxID() == stopped {
		t.Fatalf("box %s in sandbox %s, removed %v; want a_stopped in a new sandbox, %s removed", b.ID(), b.SandboxID(), removed, stopped)
	}

	running := leftover("a_running", "other") // another assistant: t1's box is helper's sandbox here
	_, _, err = e.f.Acquire(ctx, e.f.ResumeOptions(suspended("t2", "a_running", "other")), "t2")
	var we wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeSandboxUnavailable {
		t.Fatalf("resume beside a running sandbox of the box: %v; want sandbox_unavailable", err)
	}
	if _, _, removed, _ := e.mgr.State(); slices.Contains(removed, running) {
		t.Fatal("the running sandbox of the box was removed")
	}
}
