package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

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
	var info wire.ThreadInfo
	ep, err := resolve(cfg)
	if err != nil {
		return info, fmt.Errorf("create thread: %w", err)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return info, fmt.Errorf("create thread: %w", err)
	}
	u := ep.httpBase()
	u.Path = "/v1/threads"
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return info, fmt.Errorf("create thread: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := ep.do(hreq, cfg.Token)
	if err != nil {
		return info, fmt.Errorf("create thread: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return info, fmt.Errorf("create thread: %w", newHTTPError(resp))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxInfoBody)).Decode(&info); err != nil {
		return info, fmt.Errorf("create thread: read the answer: %w", err)
	}
	if info.ID == "" {
		return info, fmt.Errorf("create thread: the bridge answered without a thread id")
	}
	return info, nil
}
