package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// A fake threads API: it records the create request and answers with a
// thread, or refuses egress it does not know.
func threadsAPI(t *testing.T, got *wire.CreateThread) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/threads" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusTeapot)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(got); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if len(got.Egress) > 0 && got.Egress[0] == "example.com" {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(wire.Error{Code: wire.CodeNotAllowed, Message: "egress rule example.com is outside the bridge's cap"})
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(wire.ThreadInfo{ID: "t_new", Scope: got.Scope, Image: got.Image, Egress: got.Egress})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestCreateThread(t *testing.T) {
	t.Parallel()
	var got wire.CreateThread
	srv := threadsAPI(t, &got)
	cfg := chat.Config{URL: srv.URL, Token: "tok"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	req := wire.CreateThread{Image: "boxwire:x", Scope: wire.ScopeAssistant, Assistant: "a1", TTL: "5m", Egress: []string{"pypi.org"}}
	info, err := chat.CreateThread(ctx, cfg, req)
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != "t_new" || !reflect.DeepEqual(got.Egress, req.Egress) || got.Assistant != "a1" || got.TTL != "5m" {
		t.Errorf("sent %+v, got back %+v", got, info)
	}

	_, err = chat.CreateThread(ctx, cfg, wire.CreateThread{Egress: []string{"example.com"}})
	var werr wire.Error
	var herr *chat.HTTPError
	if !errors.As(err, &werr) || werr.Code != wire.CodeNotAllowed || !errors.As(err, &herr) || herr.StatusCode != http.StatusBadRequest {
		t.Errorf("refused create: err %v, want an HTTPError 400 with code not_allowed", err)
	}
}

// A fake PATCH /v1/threads/{id}: it keeps thread t_1's rules, answers
// GET with them, refuses rules not under example.com and unknown
// threads as the bridge does, and records each body.
func egressAPI(t *testing.T, bodies *[]string) *httptest.Server {
	t.Helper()
	rules := []string{"old.example.com"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/v1/threads/t_1" || r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(wire.Error{Code: wire.CodeNotFound, Message: "thread not found"})
			return
		}
		if r.Method == http.MethodPatch {
			raw, _ := io.ReadAll(r.Body)
			*bodies = append(*bodies, string(raw))
			var req wire.UpdateThread
			_ = json.Unmarshal(raw, &req)
			for _, rule := range req.Egress {
				if !strings.Contains(rule, ".example.com") {
					w.WriteHeader(http.StatusBadRequest)
					_ = json.NewEncoder(w).Encode(wire.Error{Code: wire.CodeNotAllowed, Message: "egress: rule " + rule + " is outside the cap"})
					return
				}
			}
			rules = req.Egress
			if len(rules) == 0 {
				rules = nil
			}
		}
		_ = json.NewEncoder(w).Encode(wire.ThreadInfo{ID: "t_1", Egress: rules})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSetEgress(t *testing.T) {
	t.Parallel()
	var bodies []string
	srv := egressAPI(t, &bodies)
	cfg := chat.Config{URL: srv.URL, Token: "tok"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if info, err := chat.GetThread(ctx, cfg, "t_1"); err != nil || !reflect.DeepEqual(info.Egress, []string{"old.example.com"}) {
		t.Fatalf("get: %+v %v", info, err)
	}
	cases := []struct {
		name  string
		id    string
		rules []string
		sent  string
		want  []string
		code  wire.Code
	}{
		{"replace", "t_1", []string{"pypi.example.com", "api.example.com:8443"}, `{"egress":["pypi.example.com","api.example.com:8443"]}`, []string{"pypi.example.com", "api.example.com:8443"}, ""},
		{"clear with nil sends an empty list", "t_1", nil, `{"egress":[]}`, nil, ""},
		{"refused", "t_1", []string{"evil.test"}, `{"egress":["evil.test"]}`, nil, wire.CodeNotAllowed},
		{"unknown thread", "t_2", []string{"a.example.com"}, "", nil, wire.CodeNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bodies = nil
			info, err := chat.SetEgress(ctx, cfg, tc.id, tc.rules)
			if tc.sent != "" && (len(bodies) != 1 || bodies[0] != tc.sent) {
				t.Errorf("sent %q, want %q", bodies, tc.sent)
			}
			if tc.code == "" {
				if err != nil || !reflect.DeepEqual(info.Egress, tc.want) {
					t.Fatalf("got %+v %v, want rules %v", info, err, tc.want)
				}
				return
			}
			var werr wire.Error
			if !errors.As(err, &werr) || werr.Code != tc.code || !strings.Contains(err.Error(), tc.id) {
				t.Fatalf("err %v, want code %s naming the thread", err, tc.code)
			}
		})
	}
	if _, err := chat.SetEgress(ctx, cfg, "", nil); err == nil {
		t.Error("empty thread id: no error")
	}
}
