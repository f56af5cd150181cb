package readiness_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/readiness"
)

func ok(context.Context) error   { return nil }
func down(context.Context) error { return errors.New("connection refused") }

// bridge serves a GET /readyz with the checks given.
func bridge(t *testing.T, c readiness.Checks) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", readiness.Handler(c))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestHandlerNamesWhatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		checks readiness.Checks
		status int
		body   []string
	}{
		{"ready", readiness.Checks{Store: ok, Engine: ok}, 200, []string{"ready\n"}},
		{"store down", readiness.Checks{Store: down, Engine: ok}, 503, []string{"store: connection refused\n"}},
		{"both down", readiness.Checks{Store: down, Engine: down}, 503, []string{"store: connection refused\n", "engine: connection refused\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Get(bridge(t, tc.checks) + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || string(body) != strings.Join(tc.body, "") {
				t.Fatalf("got %d %q; want %d %q", resp.StatusCode, body, tc.status, strings.Join(tc.body, ""))
			}
		})
	}
}

func TestStoreDownEverywhere(t *testing.T) {
	t.Parallel()
	lacking := bridge(t, readiness.Checks{Store: down, Engine: ok})
	reaching := bridge(t, readiness.Checks{Store: ok, Engine: ok})
	engineDown := bridge(t, readiness.Checks{Store: ok, Engine: down})
	silent := httptest.NewServer(http.NotFoundHandler())
	silentURL := silent.URL
	silent.Close() // nothing listens there now
	for _, tc := range []struct {
		name  string
		peers []string
		want  bool
	}{
		{"no peers: nobody could take a lease", nil, true},
		{"every peer lacks the store", []string{lacking, lacking + "/"}, true},
		{"one peer reaches it", []string{lacking, reaching}, false},
		{"a peer whose engine is down reaches the store", []string{lacking, engineDown}, false},
		{"no peer answers", []string{silentURL}, false},
		{"one lacks it, one is silent", []string{lacking, silentURL}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readiness.StoreDownEverywhere(context.Background(), tc.peers); got != tc.want {
				t.Fatalf("StoreDownEverywhere(%v) = %v; want %v", tc.peers, got, tc.want)
			}
		})
	}
}
