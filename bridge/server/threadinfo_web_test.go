package server_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/boxwire/boxwire/bridge/sandbox/sandboxtest"
	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/wire"
)

// TestThreadInfoPosture: thread info carries the posture the sandbox's
// agent reported in its hello, in the list and for the one thread.
func TestThreadInfoPosture(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	code, info, werr := e.createThread(`{}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %+v", code, werr)
	}
	want := sandboxtest.Posture
	if got := e.threadInfo(info.ID).Posture; got == nil || !reflect.DeepEqual(*got, want) {
		t.Fatalf("thread info posture %+v, want %+v", got, want)
	}
	var list wire.ThreadList
	e.getJSON("/v1/threads", &list)
	if len(list.Threads) != 1 || list.Threads[0].Posture == nil || list.Threads[0].Posture.Seccomp != 2 {
		t.Fatalf("GET /v1/threads: %+v", list.Threads)
	}
	raw, err := json.Marshal(e.threadInfo(info.ID))
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || string(fields["posture"]) == "" {
		t.Fatalf("no posture field in %s", raw)
	}
}

// TestImagesForEveryone: GET /v1/images names the default and the allowed
// images to a user who is not an admin (who may not read GET
// /v1/rollout), and to nobody unauthenticated.
func TestImagesForEveryone(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(c *server.Config) { c.Images = []string{"python:3.12", "node:22"} })
	key, _ := e.userKey("alice")
	get := func(path, key string) (int, []byte) {
		req, err := http.NewRequest(http.MethodGet, e.hs.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	code, body := get("/v1/images", key)
	var list wire.ImageList
	if code != http.StatusOK || json.Unmarshal(body, &list) != nil {
		t.Fatalf("GET /v1/images as alice: %d %s", code, body)
	}
	if want := (wire.ImageList{Default: "boxwire:test", Images: []string{"boxwire:test", "python:3.12", "node:22"}}); !reflect.DeepEqual(list, want) {
		t.Fatalf("GET /v1/images = %+v, want %+v", list, want)
	}
	if code, _ := get("/v1/rollout", key); code != http.StatusForbidden {
		t.Fatalf("GET /v1/rollout as alice: %d, want 403", code)
	}
	if code, _ := get("/v1/images", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /v1/images without a key: %d, want 401", code)
	}
}
