package threadapi_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/threadapi"
	"github.com/boxwire/boxwire/bridge/wire"
)

// fakeThreads knows thread t_1 only, with events 1..600.
type fakeThreads struct {
	createErr error
	deleteErr error
	moveErr   error
	flushed   bool
}

func (f *fakeThreads) Create(_ context.Context, req wire.CreateThread) (wire.ThreadInfo, error) {
	return wire.ThreadInfo{ID: "t_new", Image: req.Image}, f.createErr
}
func (f *fakeThreads) List(context.Context, string) []wire.ThreadInfo { return []wire.ThreadInfo{} }
func (f *fakeThreads) Get(_ context.Context, id string) (wire.ThreadInfo, error) {
	if id != "t_1" {
		return wire.ThreadInfo{}, threadapi.ErrNoThread
	}
	return wire.ThreadInfo{ID: id}, nil
}
func (f *fakeThreads) Delete(_ context.Context, id, _ string) error {
	if id != "t_1" {
		return threadapi.ErrNoThread
	}
	return f.deleteErr
}
func (f *fakeThreads) Known(_ context.Context, id string) (bool, error) { return id == "t_1", nil }
func (f *fakeThreads) MoveImage(_ context.Context, id, image string) (wire.ThreadInfo, error) {
	return wire.ThreadInfo{ID: id, Image: image}, f.moveErr
}
func (f *fakeThreads) ThreadEgress(rules []string) ([]string, error) {
	if len(rules) > 0 && rules[0] == "bad" {
		return nil, wire.Error{Code: wire.CodeNotAllowed, Message: "rule bad is not allowed"}
	}
	return rules, nil
}
func (f *fakeThreads) SetEgress(_ context.Context, id string, rules []string) (wire.ThreadInfo, error) {
	return wire.ThreadInfo{ID: id, Egress: rules}, nil
}
func (f *fakeThreads) Flush() { f.flushed = true }
func (f *fakeThreads) Events(_ string, after uint64, limit int) ([]wire.Envelope, error) {
	var out []wire.Envelope
	for seq := after + 1; seq <= 600 && len(out) < limit; seq++ {
		env := wire.MustNew(wire.TypePong, "t_1", "", nil)
		env.Seq = seq
		out = append(out, env)
	}
	return out, nil
}

func mux(f *fakeThreads) *http.ServeMux {
	api := threadapi.API{Threads: f, Log: slog.New(slog.DiscardHandler)}
	m := http.NewServeMux()
	m.HandleFunc("POST /v1/threads", api.Create)
	m.HandleFunc("GET /v1/threads", api.List)
	m.HandleFunc("GET /v1/threads/{id}", api.Get)
	m.HandleFunc("DELETE /v1/threads/{id}", api.Delete)
	m.HandleFunc("PATCH /v1/threads/{id}", api.Patch)
	m.HandleFunc("GET /v1/threads/{id}/events", api.Export)
	return m
}

func do(m *http.ServeMux, method, path, body string) (int, string) {
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec.Code, rec.Body.String()
}

// TestRoutes: bodies and queries the API refuses (400), unknown threads
// (404), each wire code's status, and the answers of each route.
func TestRoutes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		fake         fakeThreads
		method, path string
		body         string
		code         int
		has          string
	}{
		{"create", fakeThreads{}, "POST", "/v1/threads", `{"image":"img"}`, 201, `"image":"img"`},
		{"create, no body", fakeThreads{}, "POST", "/v1/threads", ``, 201, `"t_new"`},
		{"create, bad body", fakeThreads{}, "POST", "/v1/threads", `{`, 400, "bad_message"},
		{"create, limit", fakeThreads{createErr: wire.Error{Code: wire.CodeSandboxLimit, Message: "full"}}, "POST", "/v1/threads", ``, 429, "full"},
		{"create, quota", fakeThreads{createErr: wire.Error{Code: wire.CodeQuotaExceeded}}, "POST", "/v1/threads", ``, 429, "quota_exceeded"},
		{"create, engine", fakeThreads{createErr: wire.Error{Code: wire.CodeEngineUnavailable}}, "POST", "/v1/threads", ``, 503, "engine_unavailable"},
		{"create, not allowed", fakeThreads{createErr: wire.Error{Code: wire.CodeNotAllowed}}, "POST", "/v1/threads", ``, 400, "not_allowed"},
		{"create, sandbox", fakeThreads{createErr: wire.Error{Code: wire.CodeSandboxUnavailable}}, "POST", "/v1/threads", ``, 502, "sandbox_unavailable"},
		{"create, not a wire error", fakeThreads{createErr: errors.New("boom")}, "POST", "/v1/threads", ``, 502, "could not start a sandbox: boom"},
		{"list", fakeThreads{}, "GET", "/v1/threads", ``, 200, `{"threads":[]}`},
		{"get", fakeThreads{}, "GET", "/v1/threads/t_1", ``, 200, `"t_1"`},
		{"get, unknown", fakeThreads{}, "GET", "/v1/threads/t_9", ``, 404, `thread \"t_9\" not found`},
		{"delete", fakeThreads{}, "DELETE", "/v1/threads/t_1", ``, 204, ``},
		{"delete, unknown", fakeThreads{}, "DELETE", "/v1/threads/t_9", ``, 404, "not_found"},
		{"delete, failed", fakeThreads{deleteErr: errors.New("engine gone")}, "DELETE", "/v1/threads/t_1", ``, 500, "engine gone"},
		{"patch egress", fakeThreads{}, "PATCH", "/v1/threads/t_1", `{"egress":["pypi.org"]}`, 200, `"pypi.org"`},
		{"patch, no field", fakeThreads{}, "PATCH", "/v1/threads/t_1", `{}`, 400, "egress is required"},
		{"patch, empty image", fakeThreads{}, "PATCH", "/v1/threads/t_1", `{"image":""}`, 400, "allowed image"},
		{"patch, bad json", fakeThreads{}, "PATCH", "/v1/threads/t_1", `[`, 400, "bad_message"},
		{"patch, unknown", fakeThreads{}, "PATCH", "/v1/threads/t_9", `{"egress":[]}`, 404, "not_found"},
		{"patch, refused rule", fakeThreads{}, "PATCH", "/v1/threads/t_1", `{"egress":["bad"]}`, 400, "not_allowed"},
		{"patch image", fakeThreads{}, "PATCH", "/v1/threads/t_1", `{"image":"other"}`, 200, `"image":"other"`},
		{"patch image, refused", fakeThreads{moveErr: wire.Error{Code: wire.CodeNotAllowed, Message: "no"}}, "PATCH", "/v1/threads/t_1", `{"image":"x"}`, 400, "not_allowed"},
		{"patch image, gone", fakeThreads{moveErr: threadapi.ErrNoThread}, "PATCH", "/v1/threads/t_1", `{"image":"x"}`, 404, "not_found"},
		{"patch image, failed", fakeThreads{moveErr: errors.New("engine")}, "PATCH", "/v1/threads/t_1", `{"image":"x"}`, 500, "internal"},
		{"export, bad after", fakeThreads{}, "GET", "/v1/threads/t_1/events?after=x", ``, 400, "after must be a seq number"},
		{"export, unknown", fakeThreads{}, "GET", "/v1/threads/t_9/events", ``, 404, "not_found"},
	}
	for _, c := range cases {
		code, body := do(mux(&c.fake), c.method, c.path, c.body)
		if code != c.code || !strings.Contains(body, c.has) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, code, body, c.code, c.has)
		}
	}
}

// TestExport: every stored event after `after`, one JSON line each,
// across the store's pages, once the store is flushed.
func TestExport(t *testing.T) {
	t.Parallel()
	f := &fakeThreads{}
	code, body := do(mux(f), "GET", "/v1/threads/t_1/events?after=100", "")
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if code != 200 || len(lines) != 500 || !f.flushed {
		t.Fatalf("export: %d, %d lines, flushed %v", code, len(lines), f.flushed)
	}
	for i, l := range lines {
		env, err := wire.ReadMessage(strings.NewReader(l), wire.MaxMessageBytes)
		if err != nil || env.Seq != uint64(101+i) {
			t.Fatalf("line %d: %s (%v)", i, l, err)
		}
	}
}
