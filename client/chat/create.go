package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/boxwire/boxwire/bridge/wire"
)

// maxInfoBody bounds the bridge's answer to POST /v1/threads.
const maxInfoBody = 1 << 20

// CreateThread creates a thread and its sandbox with req's settings (image,
// runtime, scope, ttl, egress, policy) through the bridge's HTTP API
// (POST /v1/threads), using cfg's URL, token and dialer, and returns the
// bridge's description of it. It blocks until the sandbox's agent is
// ready, the bridge refuses, or ctx ends. A refusal is an *HTTPError that
// unwraps to the bridge's wire.Error (e.g. code not_allowed).
func CreateThread(ctx context.Context, cfg Config, req wire.CreateThread) (wire.ThreadInfo, error) {
	info, err := threadCall(ctx, cfg, http.MethodPost, "", req)
	if err != nil {
		return info, fmt.Errorf("create thread: %w", err)
	}
	return info, nil
}

// GetThread describes thread id (GET /v1/threads/{id}), its egress rules
// included, using cfg's URL, token and dialer. It blocks until the bridge
// answers or ctx ends. An unknown thread is an *HTTPError that unwraps to
// a wire.Error with code not_found.
func GetThread(ctx context.Context, cfg Config, id string) (wire.ThreadInfo, error) {
	if id == "" {
		return wire.ThreadInfo{}, errors.New("get thread: empty id")
	}
	info, err := threadCall(ctx, cfg, http.MethodGet, id, nil)
	if err != nil {
		return info, fmt.Errorf("get thread %s: %w", id, err)
	}
	return info, nil
}

// SetEgress replaces thread id's own egress rules with rules (none or nil
// removes them) through the bridge's HTTP API (PATCH /v1/threads/{id},
// docs/egress-thread.md), using cfg's URL, token and dialer, and returns
// the thread with its new canonical rules. The thread's sandbox decides
// with them from its next request on. It blocks until the bridge answers
// or ctx ends. A refusal is an *HTTPError that unwraps to the bridge's
// wire.Error: bad_message for a rule that does not parse, not_allowed for
// one outside the bridge's cap, not_found for an unknown thread.
func SetEgress(ctx context.Context, cfg Config, id string, rules []string) (wire.ThreadInfo, error) {
	if id == "" {
		return wire.ThreadInfo{}, errors.New("set egress: empty thread id")
	}
	if rules == nil {
		rules = []string{} // the bridge wants the list, an empty one to clear
	}
	info, err := threadCall(ctx, cfg, http.MethodPatch, id, wire.UpdateThread{Egress: rules})
	if err != nil {
		return info, fmt.Errorf("set egress of %s: %w", id, err)
	}
	return info, nil
}

// SetImage moves thread id to image, one of the bridge's allowed images,
// through the bridge's HTTP API (PATCH /v1/threads/{id} {"image"},
// docs/lifecycle.md "Rollouts"), using cfg's URL, token and dialer, and
// returns the thread naming its new image. The bridge replaces the
// thread's sandbox on the new image, keeping workspace and conversation:
// at once when it is idle, else when its work ends. It blocks until the
// bridge answers or ctx ends. A refusal is an *HTTPError that unwraps to
// the bridge's wire.Error: not_allowed for an image outside the
// allowlist, not_found for an unknown thread.
func SetImage(ctx context.Context, cfg Config, id, image string) (wire.ThreadInfo, error) {
	if id == "" {
		return wire.ThreadInfo{}, errors.New("set image: empty thread id")
	}
	body := struct {
		Image string `json:"image"`
	}{image}
	info, err := threadCall(ctx, cfg, http.MethodPatch, id, body)
	if err != nil {
		return info, fmt.Errorf("move %s to image %s: %w", id, image, err)
	}
	return info, nil
}

// threadCall sends method to /v1/threads (or /v1/threads/{id}) with body
// as JSON (none when nil) and decodes the answer's ThreadInfo.
func threadCall(ctx context.Context, cfg Config, method, id string, body any) (wire.ThreadInfo, error) {
	var info wire.ThreadInfo
	resp, err := call(ctx, cfg, method, func(u *url.URL) {
		u.Path = "/v1/threads"
		if id != "" {
			threadPath(u, id, "") // http.go
		}
	}, body)
	if err != nil {
		return info, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxInfoBody)).Decode(&info); err != nil {
		return info, fmt.Errorf("read the answer: %w", err)
	}
	if info.ID == "" {
		return info, errors.New("the bridge answered without a thread id")
	}
	return info, nil
}
