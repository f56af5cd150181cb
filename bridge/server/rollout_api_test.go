package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/testutil"
	"github.com/boxwire/boxwire/bridge/wire"
)

// rolloutAPI sends method /v1/rollout with body as the admin and decodes
// a 200 answer.
func (e *env) rolloutAPI(method, body string) (int, fleet.RolloutStatus) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.hs.URL+"/v1/rollout", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st fleet.RolloutStatus
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &st); err != nil {
			e.t.Fatalf("%s /v1/rollout: %v: %s", method, err, raw)
		}
	}
	return resp.StatusCode, st
}

// GET /v1/rollout shows the images in use and the pace; POST pauses and
// resumes; a body without paused is refused.
func TestRolloutAPI(t *testing.T) {
	e := newEnvWith(t, func(c *server.Config) {
		c.Rollout = fleet.RolloutConfig{Batch: 2, Interval: time.Minute}
		c.ReapInterval = 50 * time.Millisecond
	})
	e.mgr.setImage("boxwire:test", "sha256:aaaaaaaaaaaaaaaaaaaa")
	_, id := e.attach("", 0)
	_ = id
	st := testutil.Poll(t, "the rollout status naming the image's id", waitFor, func() (fleet.RolloutStatus, error) {
		code, st := e.rolloutAPI(http.MethodGet, "")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/rollout: %d", code)
		}
		if len(st.Images) != 1 || st.Images[0].ImageID == "" {
			return st, fmt.Errorf("rollout status %+v: the image was never looked up", st)
		}
		return st, nil
	})
	if u := st.Images[0]; st.Paused || st.Batch != 2 || st.Interval != "1m0s" || u.Image != "boxwire:test" || u.Sandboxes != 1 || u.Threads != 1 || u.Behind != 0 {
		t.Fatalf("rollout status %+v", st)
	}
	if code, st := e.rolloutAPI(http.MethodPost, `{"paused":true}`); code != http.StatusOK || !st.Paused {
		t.Fatalf("pause: %d %+v", code, st)
	}
	if code, st := e.rolloutAPI(http.MethodPost, `{"paused":false}`); code != http.StatusOK || st.Paused {
		t.Fatalf("resume: %d %+v", code, st)
	}
	if code, _ := e.rolloutAPI(http.MethodPost, `{}`); code != http.StatusBadRequest {
		t.Fatalf("POST without paused: %d, want 400", code)
	}
}

// PATCH {"image"} moves a thread to another allowed image: its sandbox is
// replaced (image_update), the thread says the new image, the
// conversation goes on; an image outside the allowlist is refused.
func TestPatchThreadImage(t *testing.T) {
	e := newEnvWith(t, func(c *server.Config) { c.Images = []string{"boxwire:other"} })
	e.mgr.setImage("boxwire:test", "sha256:aaaaaaaaaaaaaaaaaaaa")
	e.mgr.setImage("boxwire:other", "sha256:cccccccccccccccccccc")
	s, id := e.attach("", 0)
	s.turn("m1", "hi")
	if code, _, werr := e.threadsAPI(http.MethodPatch, "/v1/threads/"+id, `{"image":"evil:latest"}`, http.StatusOK); code != http.StatusBadRequest || werr.Code != wire.CodeNotAllowed {
		t.Fatalf("PATCH to an image not allowed: %d %+v", code, werr)
	}
	code, info, werr := e.threadsAPI(http.MethodPatch, "/v1/threads/"+id, `{"image":"boxwire:other"}`, http.StatusOK)
	if code != http.StatusOK || info.Image != "boxwire:other" {
		t.Fatalf("PATCH image: %d %+v %+v", code, info, werr)
	}
	rep := s.replaced(wire.ExitImageUpdate)
	if !strings.Contains(rep.Message, "boxwire:other") {
		t.Errorf("sandbox_replaced message %q, want the new image", rep.Message)
	}
	if got := e.threadInfo(id); got.Image != "boxwire:other" || got.ImageID != "sha256:cccccccccccccccccccc" {
		t.Errorf("thread after the move: image %q id %q", got.Image, got.ImageID)
	}
	s.turn("m2", "hi again")
}
