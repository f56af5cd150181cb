package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/wire"
)

// restart closes the bridge and starts a new one with cfg on the same
// engine, data folder and thread store, after leave (when not nil) made
// what a kill -9 would have left; the new one reconciles before serving.
func (e *env) restart(cfg server.Config, leave func()) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := e.srv.Close(ctx); err != nil {
		e.t.Fatalf("close: %v", err)
	}
	e.hs.Close()
	if leave != nil {
		leave()
	}
	srv, err := server.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.srv, e.hs = srv, httptest.NewServer(srv.Handler()) // closed by newEnvWith's cleanup
	if err := srv.Reconcile(ctx); err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
}

// sandboxIDOf is the fake engine's id of the sandbox started with spec.
func (e *env) sandboxIDOf(spec sandbox.Spec) string {
	e.t.Helper()
	list, _ := e.mgr.List(context.Background(), map[string]string{sandbox.LabelBox: spec.Labels[sandbox.LabelBox]})
	if len(list) != 1 {
		e.t.Fatalf("%d sandboxes for box %s", len(list), spec.Labels[sandbox.LabelBox])
	}
	return list[0].ID
}

// A bridge restart adopts the pooled sandbox a thread took: the thread goes
// on in the same sandbox (its LLM token still works) with its own idle TTL;
// a pooled sandbox nobody took (left by a kill -9) is removed with its
// volume and folder; the new bridge's pool refills without going past
// --max-sandboxes.
func TestPoolClaimedSandboxAdoptedAfterRestart(t *testing.T) {
	for _, maxBoxes := range []int{0, 2} {
		t.Run(fmt.Sprintf("max sandboxes %d", maxBoxes), func(t *testing.T) {
			var cfg server.Config
			var pm *peakManager
			e := newEnvWith(t, func(c *server.Config) {
				pm = &peakManager{fakeManager: c.Manager.(*fakeManager)}
				c.Manager, c.Pool, c.MaxSandboxes = pm, 1, maxBoxes
				c.Store, c.IdleTTL = server.NewMemStore(), time.Hour
				cfg = *c
			})
			e.awaitPooled(1)
			_, info, _ := e.createThread(`{"ttl":"10m"}`)
			if info.ID == "" {
				t.Fatalf("no thread:\n%s", e.logs.String())
			}
			claimed := e.pooledSpecs()[0]
			if info.SandboxID != e.sandboxIDOf(claimed) {
				t.Fatalf("thread runs in %s, not the pooled sandbox", info.SandboxID)
			}
			s, _ := e.attach(info.ID, 0)
			first := s.turn("m1", "hi")
			last := first[len(first)-1].Seq
			spare := e.awaitPooled(2)[1]
			s.conn.Close()

			e.restart(cfg, func() {
				// What kill -9 leaves: Close removed the unclaimed spare; bring it back.
				if err := os.MkdirAll(spare.SocketDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(spare.AgentDir, 0o700); err != nil {
					t.Fatal(err)
				}
				if _, err := e.mgr.Create(context.Background(), spare); err != nil {
					t.Fatal(err)
				}
			})

			live, _ := e.mgr.List(context.Background(), map[string]string{sandbox.LabelBox: spare.Labels[sandbox.LabelBox]})
			_, _, _, volumes := e.mgr.State()
			if len(live) != 0 || !slices.Contains(volumes, spare.WorkspaceVolume) {
				t.Errorf("unclaimed pooled sandbox of the earlier run: %d left, volumes removed %v", len(live), volumes)
			}
			if _, err := os.Stat(spare.SocketDir); err == nil {
				t.Errorf("socket folder %s of the unclaimed pooled sandbox left", spare.SocketDir)
			}
			got := e.threadInfo(info.ID)
			if got.SandboxID != info.SandboxID {
				t.Fatalf("after restart the thread runs in %s, want the adopted %s", got.SandboxID, info.SandboxID)
			}
			if idle := time.Until(got.IdleExpires); idle > 11*time.Minute || idle < 8*time.Minute {
				t.Errorf("idle expiry in %v after adoption, want the thread's own ttl of 10m", idle)
			}
			s2, _ := e.attach(info.ID, last)
			events := s2.turn("m2", "again")
			if m := events[len(events)-2]; m.Type != wire.TypeAssistantMessage || !strings.Contains(string(m.Data), "hello from the model") {
				t.Fatalf("turn after restart: %s", summary(events))
			}
			e.awaitLog("warm pool: sandbox ready", 3) // the new bridge's pool
			if peak := pm.maxLive(); maxBoxes > 0 && peak > maxBoxes {
				t.Errorf("the engine ran %d sandboxes at once, limit %d", peak, maxBoxes)
			}
		})
	}
}
