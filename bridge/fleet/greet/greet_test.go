package greet

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// fakeAgent serves the agent's socket in a test's agent folder: each
// connection's frames go to its script, which answers as it likes.
type fakeAgent struct {
	dirs boxdir.Dirs
}

// startFakeAgent listens on the agent socket of a new folder and runs
// script for every connection.
func startFakeAgent(t *testing.T, script func(conn *websocket.Conn)) fakeAgent {
	t.Helper()
	root := t.TempDir()
	dirs := boxdir.Dirs{Bridge: filepath.Join(root, "run", "box1"), Agent: root}
	ln, err := net.Listen("unix", filepath.Join(dirs.Agent, AgentSocket))
	if err != nil {
		t.Fatal(err)
	}
	up := websocket.Upgrader{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		script(conn)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return fakeAgent{dirs: dirs}
}

// read reads one envelope, failing the test (from any goroutine) on error.
func read(t *testing.T, conn *websocket.Conn) wire.Envelope {
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var env wire.Envelope
	if err := conn.ReadJSON(&env); err != nil {
		t.Errorf("fake agent read: %v", err)
	}
	return env
}

// drain reads until the other side closes the connection.
func drain(conn *websocket.Conn) {
	for {
		if _, _, err := conn.NextReader(); err != nil {
			return
		}
	}
}

// helloFrom is the agent's answer to hello id for thread, as instance.
func helloFrom(thread, id, instance string) wire.Envelope {
	return wire.MustNew(wire.TypeHello, thread, id, wire.Hello{
		Version: wire.Version, Role: wire.RoleAgent, Software: "boxwire-agent/test", Thread: thread, Instance: instance,
	})
}

type noEngine struct{}

func (noEngine) Inspect(context.Context, string) (sandbox.Sandbox, error) {
	return sandbox.Sandbox{Running: true}, nil
}

func newTestGreeter() *Greeter {
	return New(Config{Software: "test", Engine: noEngine{}, Token: func(box string) string { return "tok-" + box }})
}

// A claim of a sandbox greeted before goes right behind the hello: the
// fake agent reads both frames before it answers either, which a claim
// sent only after the hello's answer would never let it do.
func TestClaimSendsTheClaimBehindTheHello(t *testing.T) {
	t.Parallel()
	agent := startFakeAgent(t, func(conn *websocket.Conn) {
		hello, claim := read(t, conn), read(t, conn)
		if hello.Type != wire.TypeHello || claim.Type != wire.TypeClaim {
			t.Errorf("got %s then %s, want hello then claim", hello.Type, claim.Type)
			return
		}
		var c wire.Claim
		if err := claim.Decode(&c); err != nil || c.LLMToken != "tok-box1" {
			t.Errorf("claim %+v, %v: want the box's token", c, err)
		}
		_ = conn.WriteJSON(helloFrom("t_1", hello.ID, "i1"))
		_ = conn.WriteJSON(wire.MustNew(wire.TypeClaimed, "t_1", claim.ID, nil))
		drain(conn)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, build, err := newTestGreeter().Claim(ctx, Target{Dirs: agent.dirs}, "t_1", AgentBuild{Instance: "i1"})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	conn.Close()
	if build.Instance != "i1" || build.Version != "test" {
		t.Fatalf("build %+v", build)
	}
}

// An agent that is not the process greeted before (it started again) is
// refused, as one that refuses the claim is.
func TestClaimRefusesAnotherInstanceOrARefusal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		instance string // the hello's
		refuse   bool   // answer the claim with an error
	}{
		{"new instance", "i2", false},
		{"claim refused", "i1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			agent := startFakeAgent(t, func(conn *websocket.Conn) {
				hello, claim := read(t, conn), read(t, conn)
				_ = conn.WriteJSON(helloFrom("t_1", hello.ID, tc.instance))
				if tc.refuse {
					_ = conn.WriteJSON(wire.ErrorEnvelope("t_1", claim.ID, wire.CodeNotAllowed, "no"))
				} else {
					_ = conn.WriteJSON(wire.MustNew(wire.TypeClaimed, "t_1", claim.ID, nil))
				}
				drain(conn)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, _, err := newTestGreeter().Claim(ctx, Target{Dirs: agent.dirs}, "t_1", AgentBuild{Instance: "i1"})
			if err == nil {
				conn.Close()
				t.Fatal("Claim succeeded")
			}
			if !errors.Is(err, errAgentAnswer) {
				t.Fatalf("err %v, want errAgentAnswer", err)
			}
		})
	}
}

// Without an instance from an earlier hello, Claim greets in order, as
// Dial does: the claim comes only after the hello's answer, which the fake
// agent sends 100 ms late while it reads on.
func TestClaimWithoutInstanceWaitsForTheHello(t *testing.T) {
	t.Parallel()
	agent := startFakeAgent(t, func(conn *websocket.Conn) {
		hello := read(t, conn)
		claimed := make(chan time.Time, 1)
		go func() {
			claim := read(t, conn)
			claimed <- time.Now()
			if claim.Type != wire.TypeClaim {
				t.Errorf("got %s after the hello, want claim", claim.Type)
			}
		}()
		time.Sleep(100 * time.Millisecond)
		answered := time.Now()
		_ = conn.WriteJSON(helloFrom("t_1", hello.ID, "i9"))
		if at := <-claimed; at.Before(answered) {
			t.Errorf("the claim came %v before the hello was answered", answered.Sub(at))
		}
		_ = conn.WriteJSON(wire.MustNew(wire.TypeClaimed, "t_1", "claim", nil))
		drain(conn)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, build, err := newTestGreeter().Claim(ctx, Target{Dirs: agent.dirs}, "t_1", AgentBuild{})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	conn.Close()
	if build.Instance != "i9" {
		t.Fatalf("build %+v", build)
	}
}
