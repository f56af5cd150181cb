package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Identity is who the bridge says the client's credentials are
// (GET /v1/users/me), with the user's limits and what they use now.
type Identity struct {
	User   string `json:"user"`
	Admin  bool   `json:"admin"`
	Via    string `json:"via"` // "token", "key" or "oidc"
	KeyID  string `json:"key_id,omitempty"`
	Limits struct {
		Sandboxes    int   `json:"sandboxes,omitempty"`
		TokensPerDay int64 `json:"tokens_per_day,omitempty"`
	} `json:"limits"`
	Usage struct {
		Sandboxes int `json:"sandboxes"`
	} `json:"usage"`
}

// WhoAmI asks the bridge who cfg's token is. It blocks until the bridge
// answers or ctx ends.
func WhoAmI(ctx context.Context, cfg Config) (Identity, error) {
	var id Identity
	resp, err := call(ctx, cfg, http.MethodGet, func(u *url.URL) { u.Path = "/v1/users/me" }, nil)
	if err != nil {
		return id, fmt.Errorf("whoami: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&id); err != nil {
		return id, fmt.Errorf("whoami: %w", err)
	}
	return id, nil
}
