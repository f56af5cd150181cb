package server_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

func newPoolEnv(t *testing.T, n int) *env {
	t.Helper()
	return newEnvWith(t, func(c *server.Config) { c.Pool = n })
}

// pooledSpecs are the specs of the sandboxes started for the pool.
func (e *env) pooledSpecs() []sandbox.Spec {
	_, specs, _, _ := e.mgr.State()
	var out []sandbox.Spec
	for _, s := range specs {
		if s.Labels["boxwire.pool"] == "1" {
			out = append(out, s)
		}
	}
	return out
}

// awaitPooled waits until n sandboxes were started for the pool and the
// newest one is ready (its agent answered, so the filler logged it).
func (e *env) awaitPooled(n int) []sandbox.Spec {
	e.t.Helper()
	return testutil.Poll(e.t, fmt.Sprintf("the pool starting %d sandboxes", n), waitFor, func() ([]sandbox.Spec, error) {
		specs := e.pooledSpecs()
		if len(specs) >= n && strings.Count(e.logs.String(), "warm pool: sandbox ready") >= n {
			return specs, nil
		}
		return nil, fmt.Errorf("%d started; the log:\n%s", len(specs), e.logs.String())
	})
}

// postThread creates a thread with the bridge's defaults; it fails the
// test unless 201.
func (e *env) postThread() wire.ThreadInfo {
	e.t.Helper()
	code, info, werr := e.createThread(`{}`)
	if code != http.StatusCreated {
		e.t.Fatalf("POST /v1/threads: %d %+v", code, werr)
	}
	return info
}

func TestPoolThreadTakesPooledSandbox(t *testing.T) {
	tests := []struct {
		name string
		open func(e *env) (*session, string)
	}{
		{"post then hello", func(e *env) (*session, string) {
			info := e.postThread()
			s, _ := e.attach(info.ID, 0)
			return s, info.ID
		}},
		{"hello without a thread", func(e *env) (*session, string) { return e.attach("", 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newPoolEnv(t, 1)
			pooled := e.awaitPooled(1)[0]
			if _, ok := pooled.Labels[sandbox.LabelThread]; ok {
				t.Errorf("pooled sandbox has a thread label: %v", pooled.Labels)
			}
			if v := envValue(pooled.Env, "BOXWIRE_LLM_TOKEN"); v != "" {
				t.Errorf("pooled sandbox got an LLM token in its environment")
			}
			if _, err := os.Stat(filepath.Join(pooled.SocketDir, "llm.sock")); err == nil {
				t.Errorf("pooled sandbox has an LLM proxy socket before a thread took it")
			}

			s, id := tt.open(e)
			events := s.turn("m1", "hi")
			if last := events[len(events)-2]; last.Type != wire.TypeAssistantMessage || !strings.Contains(string(last.Data), "hello from the model") {
				t.Fatalf("turn in a pooled sandbox: %s", summary(events))
			}
			if _, err := os.Stat(filepath.Join(pooled.SocketDir, "llm.sock")); err != nil {
				t.Errorf("claimed sandbox has no LLM proxy socket: %v", err)
			}
			if !strings.Contains(e.logs.String(), "thread took a pooled sandbox") || !strings.Contains(e.logs.String(), id) {
				t.Errorf("thread %s did not take the pooled sandbox:\n%s", id, e.logs.String())
			}
			e.awaitPooled(2) // refilled
		})
	}
}

func TestPoolClaimIsNotForClients(t *testing.T) {
	e := newPoolEnv(t, 1)
	e.awaitPooled(1)
	s, _ := e.attach("", 0)
	for _, typ := range []wire.Type{wire.TypeClaim, wire.TypeClaimed} {
		s.request(typ, "c1", wire.Claim{LLMToken: "mine"})
		s.readError(wire.CodeNotAllowed)
	}
}

func TestPoolCloseRemovesUnclaimedSandboxes(t *testing.T) {
	e := newPoolEnv(t, 2)
	specs := e.awaitPooled(2)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := e.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	live, _, _, vols := e.mgr.State()
	if live != 0 {
		t.Errorf("%d sandboxes left after Close; want the pool's removed", live)
	}
	for _, s := range specs {
		if !slices.Contains(vols, s.WorkspaceVolume) {
			t.Errorf("volume %s of an unclaimed pooled sandbox left", s.WorkspaceVolume)
		}
		if _, err := os.Stat(s.SocketDir); err == nil {
			t.Errorf("socket folder %s of an unclaimed pooled sandbox left", s.SocketDir)
		}
	}
}

func TestPoolOffStartsNothing(t *testing.T) {
	e := newEnv(t)
	s, _ := e.attach("", 0)
	s.turn("m1", "hi")
	if n := len(e.pooledSpecs()); n != 0 {
		t.Errorf("%d pooled sandboxes with the pool off", n)
	}
}
