package fleet_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/fleet/collect"
	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/recordstore"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/sandbox/sandboxtest"
	"github.com/boxwire/boxwire/bridge/wire"
)

// fleetEnv is a fleet over a fake manager, its records and data folder.
type fleetEnv struct {
	t    *testing.T
	mgr  *fakeManager
	recs fleet.Records // in memory (recordstore.NewMem)
	dir  string
	f    *fleet.Fleet
}

// newFleet starts a fleet; edit may change its config. The fleet is
// stopped and closed when the test ends.
func newFleet(t *testing.T, edit func(*fleet.Config)) *fleetEnv {
	t.Helper()
	dir, err := os.MkdirTemp("", "bwf") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	e := &fleetEnv{t: t, mgr: sandboxtest.NewFake(), recs: recordstore.NewMem(), dir: dir}
	cfg := e.config()
	if edit != nil {
		edit(&cfg)
	}
	f, err := fleet.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.f = f
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
		if err := f.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		e.mgr.StopAll()
		_ = boxdir.RemoveAll(dir)
		_ = os.RemoveAll(dir)
	})
	return e
}

func (e *fleetEnv) config() fleet.Config {
	uid, gid := os.Getuid(), os.Getgid()
	return fleet.Config{
		Manager: e.mgr, Records: e.recs, BridgeID: "bridge-test", Token: "secret-token",
		Layout:     boxdir.New(boxdir.Config{Root: e.dir, UID: uid, GID: gid}),
		SandboxUID: uid, SandboxGID: gid, DataDir: e.dir, Image: "boxwire:test",
		Software: "boxwire-bridge/test",
		LLM:      llmproxy.Config{Upstream: "http://127.0.0.1:1/v1", APIKey: "sk-test"},
	}
}

// acquire gives thread id a box for req and attaches a member.
func (e *fleetEnv) acquire(id string, req wire.CreateThread) (*fleet.Box, *member) {
	e.t.Helper()
	m := &member{id: id}
	return e.acquireAs(id, req, m), m
}

// acquireAs gives thread id a box for req and attaches m; the connection
// to its agent is closed when the test ends.
func (e *fleetEnv) acquireAs(id string, req wire.CreateThread, m fleet.Member) *fleet.Box {
	e.t.Helper()
	o, err := e.f.Options(req)
	if err != nil {
		e.t.Fatalf("options: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, conn, err := e.f.Acquire(ctx, o, id)
	if err != nil {
		e.t.Fatalf("acquire %s: %v", id, err)
	}
	e.t.Cleanup(func() { conn.Close() })
	if err := e.f.Attach(b, m); err != nil {
		e.t.Fatalf("attach %s: %v", id, err)
	}
	e.f.Started(b)
	return b
}

// claims returns the LLM tokens the agent of sandbox sb was handed,
// oldest first; none when the sandbox is gone.
func (e *fleetEnv) claims(sb string) []string {
	if a, ok := e.mgr.Agent(sb); ok {
		return a.Claims()
	}
	return nil
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	t.Parallel()
	e := &fleetEnv{t: t, mgr: sandboxtest.NewFake(), recs: recordstore.NewMem(), dir: t.TempDir()}
	for _, tc := range []struct {
		name string
		edit func(*fleet.Config)
	}{
		{"no manager", func(c *fleet.Config) { c.Manager = nil }},
		{"no layout", func(c *fleet.Config) { c.Layout = nil }},
		{"no records", func(c *fleet.Config) { c.Records = nil }},
		{"no bridge id", func(c *fleet.Config) { c.BridgeID = "" }},
		{"bad egress", func(c *fleet.Config) { c.Egress = []string{"not a rule!"} }},
		{"bad thread egress cap", func(c *fleet.Config) { c.EgressThreadMax = []string{"not a rule!"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := e.config()
			tc.edit(&cfg)
			if f, err := fleet.New(cfg); err == nil {
				_ = f.Stop(context.Background())
				t.Fatal("New accepted the config")
			}
		})
	}
}

func TestOptionsRefuses(t *testing.T) {
	t.Parallel()
	e := newFleet(t, nil)
	for _, tc := range []struct {
		name string
		req  wire.CreateThread
		code wire.Code
	}{
		{"unknown scope", wire.CreateThread{Scope: "galaxy"}, wire.CodeNotAllowed},
		{"assistant without its scope", wire.CreateThread{Assistant: "a1"}, wire.CodeNotAllowed},
		{"assistant scope without a name", wire.CreateThread{Scope: wire.ScopeAssistant}, wire.CodeNotAllowed},
		{"image not allowed", wire.CreateThread{Image: "evil:latest"}, wire.CodeNotAllowed},
		{"runtime not allowed", wire.CreateThread{Runtime: "kata"}, wire.CodeNotAllowed},
		{"bad ttl", wire.CreateThread{TTL: "soon"}, wire.CodeBadMessage},
		{"egress without a cap", wire.CreateThread{Egress: []string{"example.com"}}, wire.CodeNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.f.Options(tc.req)
			var werr wire.Error
			if !errors.As(err, &werr) || werr.Code != tc.code {
				t.Fatalf("Options: %v, want code %s", err, tc.code)
			}
		})
	}
}

// TestAcquireGreetsAndClaims: a thread's box runs one sandbox whose agent
// was greeted and handed an LLM token of its own; releasing the box's only
// member owns it, and removing it removes the sandbox and its volume.
func TestAcquireGreetsAndClaims(t *testing.T) {
	t.Parallel()
	e := newFleet(t, nil)
	b, _ := e.acquire("t1", wire.CreateThread{})
	if b.Scope() != wire.ScopeThread || b.Image() != "boxwire:test" {
		t.Fatalf("box scope %q image %q", b.Scope(), b.Image())
	}
	live := e.mgr.Live()
	spec, ok := live[b.SandboxID()]
	if len(live) != 1 || !ok {
		t.Fatalf("live sandboxes %v, want only %s", live, b.SandboxID())
	}
	if spec.Labels[sandbox.LabelOwner] != "bridge-test" {
		t.Fatalf("sandbox labels %v, want boxwire.owner=bridge-test", spec.Labels)
	}
	tokens := e.claims(b.SandboxID())
	if len(tokens) != 1 || tokens[0] == "" || tokens[0] == "secret-token" {
		t.Fatalf("claims %q, want one token derived from (not equal to) the bridge's", tokens)
	}
	if slices.ContainsFunc(spec.Env, func(kv string) bool { return strings.Contains(kv, tokens[0]) }) {
		t.Fatal("the LLM token is in the sandbox's environment")
	}
	if ms := e.f.Members(b.ID()); len(ms) != 1 || ms[0].ID() != "t1" {
		t.Fatalf("members %v, want t1", ms)
	}
	if !e.f.Release(b, "t1") {
		t.Fatal("the only member's release does not own the box")
	}
	if err := e.f.Remove(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if live := e.mgr.Live(); len(live) != 0 {
		t.Fatalf("sandboxes left after Remove: %v", live)
	}
	if vols, _ := e.mgr.ListVolumes(context.Background(), nil); len(vols) != 0 {
		t.Fatalf("volumes left after Remove: %v", vols)
	}
}

// TestAssistantScopeShares: the threads of one assistant share one box,
// which outlives their release (the reaper ends it when idle).
func TestAssistantScopeShares(t *testing.T) {
	t.Parallel()
	e := newFleet(t, nil)
	req := wire.CreateThread{Scope: wire.ScopeAssistant, Assistant: "helper"}
	b1, _ := e.acquire("t1", req)
	b2, _ := e.acquire("t2", req)
	if b1 != b2 {
		t.Fatalf("threads of one assistant got boxes %s and %s", b1.ID(), b2.ID())
	}
	if n := len(e.mgr.Live()); n != 1 {
		t.Fatalf("%d sandboxes, want 1", n)
	}
	if e.f.Release(b1, "t1") || e.f.Release(b2, "t2") {
		t.Fatal("releasing a thread of a shared box owns the box")
	}
	if ms := e.f.Members(b1.ID()); len(ms) != 0 {
		t.Fatalf("members after release: %v", ms)
	}
	if n := len(e.mgr.Live()); n != 1 {
		t.Fatalf("%d sandboxes after release, want the shared one", n)
	}
}

// TestMaxSandboxes: past MaxSandboxes, Acquire fails with ErrLimit.
func TestMaxSandboxes(t *testing.T) {
	t.Parallel()
	e := newFleet(t, func(c *fleet.Config) { c.MaxSandboxes = 1 })
	e.acquire("t1", wire.CreateThread{})
	o, err := e.f.Options(wire.CreateThread{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = e.f.Acquire(context.Background(), o, "t2")
	if !errors.Is(err, fleet.ErrLimit) {
		t.Fatalf("second Acquire: %v, want ErrLimit", err)
	}
}

// TestReplaceKeepsTheVolume: Replace gives the box a new sandbox on the
// same workspace volume, its agent greeted and claimed again; LossCause
// knows no cause for a sandbox the fleet did not end.
func TestReplaceKeepsTheVolume(t *testing.T) {
	t.Parallel()
	e := newFleet(t, nil)
	b, _ := e.acquire("t1", wire.CreateThread{})
	old := b.SandboxID()
	oldVol := e.mgr.Live()[old].WorkspaceVolume
	if _, known := e.f.LossCause(context.Background(), b, "t1"); known {
		t.Fatal("a loss cause for a sandbox the fleet did not end")
	}
	e.mgr.Kill(old, 0, false)
	ctx, cancel := context.WithTimeout(context.Background(), fleet.ReplaceTimeout)
	defer cancel()
	sb, conn, err := e.f.Replace(ctx, b, "t1", wire.SandboxExited{Reason: wire.ExitDied, Message: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	e.f.Linked(b, "t1", sb)
	if sb == old || b.SandboxID() != sb {
		t.Fatalf("replaced %s by %s; the box names %s", old, sb, b.SandboxID())
	}
	live := e.mgr.Live()
	if _, ok := live[old]; ok {
		t.Fatalf("the old sandbox %s is still there", old)
	}
	if v := live[sb].WorkspaceVolume; v != oldVol || v == "" {
		t.Fatalf("new sandbox's volume %q, want the old one %q", v, oldVol)
	}
	if tokens := e.claims(sb); len(tokens) != 1 {
		t.Fatalf("the new agent got claims %q, want one", tokens)
	}
}

// TestCollect removes every sandbox and volume of a bridge id, and leaves
// another bridge's alone.
func TestCollect(t *testing.T) {
	t.Parallel()
	e := newFleet(t, nil)
	e.acquire("t1", wire.CreateThread{})
	e.acquire("t2", wire.CreateThread{})
	ctx := context.Background()
	if _, err := e.mgr.Create(ctx, sandbox.Spec{AgentDir: t.TempDir(), Labels: map[string]string{sandbox.LabelOwner: "bridge-other"}}); err != nil {
		t.Fatal(err)
	}
	sbs, vols, err := collect.Collect(ctx, e.mgr, "bridge-test", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sbs != 2 || vols != 2 {
		t.Fatalf("collected %d sandboxes and %d volumes, want 2 and 2", sbs, vols)
	}
	if live := e.mgr.Live(); len(live) != 1 {
		t.Fatalf("sandboxes left: %v, want the other bridge's one", live)
	}
}

// TestCollectLeavesRelayed: gc of a bridge id leaves a sandbox whose
// thread another bridge relays now (it took the sandbox over), with its
// volume and folders, and removes the rest.
func TestCollectLeavesRelayed(t *testing.T) {
	t.Parallel()
	e := newFleet(t, nil)
	kept, _ := e.acquire("t1", wire.CreateThread{})
	gone, _ := e.acquire("t2", wire.CreateThread{})
	ctx := context.Background()
	sbs, vols, err := collect.Collect(ctx, e.mgr, "bridge-test", e.dir, func(th string) bool { return th == "t1" })
	if err != nil || sbs != 1 || vols != 1 {
		t.Fatalf("collected %d sandboxes and %d volumes (%v), want 1 and 1", sbs, vols, err)
	}
	if _, ok := e.mgr.Live()[kept.SandboxID()]; !ok || len(e.mgr.Live()) != 1 {
		t.Fatalf("sandboxes left: %v, want t1's", e.mgr.Live())
	}
	if _, err := os.Stat(kept.Dirs().Bridge); err != nil {
		t.Errorf("t1's folder: %v", err)
	}
	if _, err := os.Stat(gone.Dirs().Bridge); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("t2's folder is still there (%v)", err)
	}
}
