package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Admin is what `bridge users`, `bridge keys` and `bridge audit` do: on
// the store directly when no bridge runs ([Local]), or through a running
// bridge's admin HTTP API ([Remote]), which the store file's lock leaves
// as the only way in then.
type Admin interface {
	AddUser(ctx context.Context, name string, admin bool) (User, error)
	Users(ctx context.Context) ([]User, error)
	// CreateKey returns the key itself, shown once, and what is stored.
	CreateKey(ctx context.Context, user, name string, ttl time.Duration) (string, Key, error)
	Keys(ctx context.Context, user string) ([]Key, error)
	RevokeKey(ctx context.Context, id string) (Key, error)
	DeleteUser(ctx context.Context, name string) error
	Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
}

// Local is Admin on an Authenticator over the store.
type Local struct{ A *Authenticator }

// AddUser adds a user with no limits of their own.
func (l Local) AddUser(ctx context.Context, name string, admin bool) (User, error) {
	return l.A.AddUser(ctx, name, admin, Limits{})
}

// Users lists the users.
func (l Local) Users(ctx context.Context) ([]User, error) { return l.A.Users(ctx) }

// CreateKey issues a key.
func (l Local) CreateKey(ctx context.Context, user, name string, ttl time.Duration) (string, Key, error) {
	return l.A.CreateKey(ctx, user, name, ttl)
}

// Keys lists keys.
func (l Local) Keys(ctx context.Context, user string) ([]Key, error) { return l.A.Keys(ctx, user) }

// RevokeKey revokes a key.
func (l Local) RevokeKey(ctx context.Context, id string) (Key, error) { return l.A.RevokeKey(ctx, id) }

// DeleteUser deletes a user and their keys.
func (l Local) DeleteUser(ctx context.Context, name string) error { return l.A.DeleteUser(ctx, name) }

// Audit reads the audit log.
func (l Local) Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	return l.A.Audit(ctx, f)
}

// Remote is Admin through a bridge's admin HTTP API at URL with an admin
// credential (docs/users.md lists the routes).
type Remote struct {
	URL   string // http://host:port
	Token string
	HTTP  *http.Client // nil: a client with a 30 s timeout
}

// CreatedKey is the admin API's answer to a key creation.
type CreatedKey struct {
	Key    string `json:"key"`
	Stored Key    `json:"stored"`
}

func (r Remote) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(r.URL, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := r.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct {
				Code, Message string
			} `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		msg := e.Error.Message
		if msg == "" {
			msg = strings.TrimSpace(string(raw))
		}
		err := fmt.Errorf("%s %s: %d %s: %s", method, path, resp.StatusCode, e.Error.Code, msg)
		switch resp.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%w: %w", ErrNotFound, err)
		case http.StatusConflict:
			return fmt.Errorf("%w: %w", ErrExists, err)
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%w: %w", ErrUnauthorized, err)
		}
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// AddUser adds a user.
func (r Remote) AddUser(ctx context.Context, name string, admin bool) (u User, err error) {
	return u, r.do(ctx, http.MethodPost, "/v1/users", map[string]any{"name": name, "admin": admin}, &u)
}

// Users lists the users.
func (r Remote) Users(ctx context.Context) (us []User, err error) {
	var out struct {
		Users []User `json:"users"`
	}
	return out.Users, r.do(ctx, http.MethodGet, "/v1/users", nil, &out)
}

// CreateKey issues a key.
func (r Remote) CreateKey(ctx context.Context, user, name string, ttl time.Duration) (string, Key, error) {
	var out CreatedKey
	body := map[string]any{"name": name}
	if ttl > 0 {
		body["expires_in"] = ttl.String()
	}
	err := r.do(ctx, http.MethodPost, "/v1/users/"+url.PathEscape(user)+"/keys", body, &out)
	return out.Key, out.Stored, err
}

// Keys lists keys.
func (r Remote) Keys(ctx context.Context, user string) ([]Key, error) {
	var out struct {
		Keys []Key `json:"keys"`
	}
	q := ""
	if user != "" {
		q = "?user=" + url.QueryEscape(user)
	}
	return out.Keys, r.do(ctx, http.MethodGet, "/v1/keys"+q, nil, &out)
}

// RevokeKey revokes a key.
func (r Remote) RevokeKey(ctx context.Context, id string) (k Key, err error) {
	return k, r.do(ctx, http.MethodDelete, "/v1/keys/"+url.PathEscape(id), nil, &k)
}

// DeleteUser deletes a user.
func (r Remote) DeleteUser(ctx context.Context, name string) error {
	return r.do(ctx, http.MethodDelete, "/v1/users/"+url.PathEscape(name), nil, nil)
}

// Audit reads the audit log.
func (r Remote) Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	q := url.Values{}
	for k, v := range map[string]string{"user": f.User, "action": f.Action, "thread": f.Thread} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.Format(time.RFC3339Nano))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out struct {
		Entries []AuditEntry `json:"entries"`
	}
	return out.Entries, r.do(ctx, http.MethodGet, "/v1/audit?"+q.Encode(), nil, &out)
}
