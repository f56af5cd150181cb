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

// fakeImages records what the API asks of the fleet's images.
type fakeImages struct {
	mu     sync.Mutex
	paused bool
	images []string
}

func (f *fakeImages) Rollout() fleet.RolloutStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fleet.RolloutStatus{Paused: f.paused, Images: []fleet.ImageUsage{}}
}

func (f *fakeImages) Pause(p bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused = p
}

func (f *fakeImages) Set(images []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images = images
}

func (f *fakeImages) List() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{"boxwire:latest"}, f.images...)
}

// requireHeader is a guard that lets a request through only with header
// name set, and answers status otherwise.
func requireHeader(name string, status int) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(name) == "" {
				w.WriteHeader(status)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// TestImagesRoute: GET /v1/images names the default and the allowed
// images to anyone the caller's check lets in, admin or not, follows a
// reload, and tells nothing of the rollout; without the check's consent
// it is refused.
func TestImagesRoute(t *testing.T) {
	t.Parallel()
	f := &fakeImages{images: []string{"python:3.12"}}
	mux := http.NewServeMux()
	auth := requireHeader("X-User", http.StatusUnauthorized)
	api := rollout.API{Images: f, Log: slog.New(slog.DiscardHandler), Reload: func() ([]string, error) { return []string{"node:22", "python:3.13"}, nil }}
	api.ImagesRoute(mux, auth)
	get := func(user string) (int, string) {
		req := httptest.NewRequest("GET", "/v1/images", nil)
		if user != "" {
			req.Header.Set("X-User", user)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec.Code, strings.TrimSpace(rec.Body.String())
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Fatalf("GET /v1/images unauthenticated: %d", code)
	}
	if code, body := get("alice"); code != http.StatusOK || body != `{"default":"boxwire:latest","images":["boxwire:latest","python:3.12"]}` {
		t.Fatalf("GET /v1/images: %d %s", code, body)
	}
	api.ReloadImages()
	if _, body := get("alice"); body != `{"default":"boxwire:latest","images":["boxwire:latest","node:22","python:3.13"]}` {
		t.Fatalf("after a reload: %s", body)
	}
	if code, _ := get("bob"); code != http.StatusOK {
		t.Fatalf("another user: %d", code)
	}
}

// TestRoutes: GET answers the status, POST pauses and resumes through the
// guards the caller gives, and a body that is not {"paused": bool} is 400
// and changes nothing.
func TestRoutes(t *testing.T) {
	t.Parallel()
	f := &fakeImages{}
	var audited []string
	mux := http.NewServeMux()
	admin := requireHeader("X-Admin", http.StatusForbidden)
	audit := func(action string, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			audited = append(audited, action)
			next.ServeHTTP(w, r)
		})
	}
	rollout.API{Images: f, Log: slog.New(slog.DiscardHandler)}.Routes(mux, admin, audit)
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
	f := &fakeImages{images: []string{"old"}}
	next, err := []string{"a", "b"}, error(nil)
	api := rollout.API{Images: f, Log: slog.New(slog.DiscardHandler), Reload: func() ([]string, error) { return next, err }}
	api.ReloadImages()
	if !slices.Equal(f.images, []string{"a", "b"}) {
		t.Fatalf("after a reload: %v", f.images)
	}
	next, err = nil, errors.New("unreadable")
	api.ReloadImages()
	if !slices.Equal(f.images, []string{"a", "b"}) {
		t.Fatalf("after a failed reload: %v", f.images)
	}
	rollout.API{Images: f, Log: slog.New(slog.DiscardHandler)}.ReloadImages() // nothing to reload
}
