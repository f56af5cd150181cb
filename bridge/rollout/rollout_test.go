package rollout_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/rollout"
)

// fakeFleet records what the API asks of the fleet.
type fakeFleet struct {
	mu     sync.Mutex
	paused bool
	images []string
}

func (f *fakeFleet) Rollout() fleet.RolloutStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fleet.RolloutStatus{Paused: f.paused, Images: []fleet.ImageUsage{}}
}

func (f *fakeFleet) PauseRollout(p bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused = p
}

func (f *fakeFleet) SetImages(images []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images = images
}

// TestRoutes: GET answers the status, POST pauses and resumes through the
// guards the caller gives, and a body that is not {"paused": bool} is 400
// and changes nothing.
func TestRoutes(t *testing.T) {
	t.Parallel()
	f := &fakeFleet{}
	var audited []string
	mux := http.NewServeMux()
	admin := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Admin") == "" {
				w.WriteHeader(http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	audit := func(action string, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			audited = append(audited, action)
			next.ServeHTTP(w, r)
		})
	}
	rollout.API{Fleet: f, Log: slog.New(slog.DiscardHandler)}.Routes(mux, admin, audit)
	do := func(method, body string, asAdmin bool) (int, string) {
		req := httptest.NewRequest(method, "/v1/rollout", strings.NewReader(body))
		if asAdmin {
			req.Header.Set("X-Admin", "1")
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	if code, _ := do("GET", "", false); code != http.StatusForbidden {
		t.Fatalf("GET without admin: %d", code)
	}
	if code, body := do("POST", `{"paused":true}`, true); code != http.StatusOK || !strings.Contains(body, `"paused":true`) || !f.paused {
		t.Fatalf("pause: %d %s", code, body)
	}
	for _, bad := range []string{`{}`, `{"paused":"yes"}`, `not json`, ``} {
		if code, body := do("POST", bad, true); code != http.StatusBadRequest || !strings.Contains(body, "bad_message") || !f.paused {
			t.Errorf("POST %q: %d %s (paused %v)", bad, code, body, f.paused)
		}
	}
	if code, body := do("GET", "", true); code != http.StatusOK || !strings.Contains(body, `"paused":true`) {
		t.Fatalf("GET: %d %s", code, body)
	}
	if len(audited) != 5 || audited[0] != "rollout.update" {
		t.Fatalf("audited %v, want every POST as rollout.update", audited)
	}
}

// TestReloadImages: a reload gives the fleet the new list; a failed one
// keeps the old.
func TestReloadImages(t *testing.T) {
	t.Parallel()
	f := &fakeFleet{images: []string{"old"}}
	next, err := []string{"a", "b"}, error(nil)
	api := rollout.API{Fleet: f, Log: slog.New(slog.DiscardHandler), Reload: func() ([]string, error) { return next, err }}
	api.ReloadImages()
	if !slices.Equal(f.images, []string{"a", "b"}) {
		t.Fatalf("after a reload: %v", f.images)
	}
	next, err = nil, errors.New("unreadable")
	api.ReloadImages()
	if !slices.Equal(f.images, []string{"a", "b"}) {
		t.Fatalf("after a failed reload: %v", f.images)
	}
	rollout.API{Fleet: f, Log: slog.New(slog.DiscardHandler)}.ReloadImages() // nothing to reload
}
