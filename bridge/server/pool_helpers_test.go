package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// peakManager is the fake manager that records the most sandboxes it ran
// at once, and can hold the pool's creates until released.
type peakManager struct {
	*fakeManager
	mu   sync.Mutex
	peak int
	hold chan struct{} // when not nil, a pooled Create waits for it (or its ctx)
	held chan struct{} // gets a value when a pooled Create starts waiting
}

func (m *peakManager) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	m.mu.Lock()
	hold := m.hold
	m.mu.Unlock()
	if hold != nil && spec.Labels["boxwire.pool"] == "1" {
		select {
		case m.held <- struct{}{}:
		default:
		}
		select {
		case <-hold:
		case <-ctx.Done():
			return sandbox.Sandbox{}, ctx.Err()
		}
	}
	sb, err := m.fakeManager.Create(ctx, spec)
	live, _, _, _ := m.fakeManager.State()
	m.mu.Lock()
	m.peak = max(m.peak, live)
	m.mu.Unlock()
	return sb, err
}

func (m *peakManager) maxLive() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}

// newLimitEnv is a bridge with a warm pool of pool and at most maxBoxes
// sandboxes, over a peakManager; hold makes the pool's creates wait.
func newLimitEnv(t *testing.T, pool, maxBoxes int, hold chan struct{}) (*env, *peakManager) {
	t.Helper()
	var pm *peakManager
	e := newEnvWith(t, func(c *server.Config) {
		pm = &peakManager{fakeManager: c.Manager.(*fakeManager), hold: hold, held: make(chan struct{}, 1)}
		c.Manager, c.Pool, c.MaxSandboxes = pm, pool, maxBoxes
		c.ReapInterval = 50 * time.Millisecond // the filler looks again after a thread's sandbox went
	})
	return e, pm
}

// threadsAPI sends an authenticated request with body to path and returns
// the status with the thread on ok, else the error.
func (e *env) threadsAPI(method, path, body string, ok int) (int, wire.ThreadInfo, wire.Error) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.hs.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var info wire.ThreadInfo
	if resp.StatusCode != ok {
		return resp.StatusCode, info, decodeJSONError(e.t, resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, info, wire.Error{}
}

// createThread posts body to /v1/threads and returns the status with the
// thread or the error.
func (e *env) createThread(body string) (int, wire.ThreadInfo, wire.Error) {
	e.t.Helper()
	return e.threadsAPI(http.MethodPost, "/v1/threads", body, http.StatusCreated)
}

// threadInfo is GET /v1/threads/{id}; it fails the test unless 200.
func (e *env) threadInfo(id string) wire.ThreadInfo {
	e.t.Helper()
	code, info, werr := e.threadsAPI(http.MethodGet, "/v1/threads/"+id, "", http.StatusOK)
	if code != http.StatusOK {
		e.t.Fatalf("GET /v1/threads/%s: %d %+v", id, code, werr)
	}
	return info
}

// awaitLog waits until the bridge logged want at least n times.
func (e *env) awaitLog(want string, n int) {
	e.t.Helper()
	testutil.Until(e.t, fmt.Sprintf("the bridge logging %q %d times", want, n), waitFor, func() error {
		if got := strings.Count(e.logs.String(), want); got < n {
			return fmt.Errorf("logged %d times:\n%s", got, e.logs.String())
		}
		return nil
	})
}
