package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
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
