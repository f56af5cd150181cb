package egress_test

import (
	"context"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/egress"
)

// credProxy serves a proxy that adds a credential for the upstream's
// target and asks check about everything; it returns an HTTP client that
// goes through it and trusts its CA.
func credProxy(t *testing.T, upstream *httptest.Server, check func(egress.Request) egress.Verdict) *http.Client {
	t.Helper()
	dir := t.TempDir()
	ca, err := egress.LoadOrCreateCA(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := egress.LoadOrCreateCA(filepath.Join(dir, "ca"))
	if err != nil || string(again.CertPEM()) != string(ca.CertPEM()) {
		t.Fatalf("reloaded CA differs: %v", err)
	}
	target, err := egress.Normalize(upstream.Listener.Addr().String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	rules, _ := egress.ParseRules([]string{target.String()})
	roots := x509.NewCertPool()
	if upstream.TLS != nil {
		roots.AddCert(upstream.Certificate())
	}
	p := egress.New(egress.Config{Rules: rules, Logger: slog.New(slog.DiscardHandler), CA: ca, UpstreamRoots: roots,
		Check: func(_ context.Context, r egress.Request) egress.Verdict { return check(r) },
		Credentials: func(tg egress.Target) (egress.Credential, bool) {
			if tg == target {
				return egress.Credential{Name: "api", Header: "Authorization", Value: "Bearer host-held-secret"}, true
			}
			return egress.Credential{}, false
		}})
	sock, _ := serveUnix(t, p)
	trust := x509.NewCertPool()
	trust.AppendCertsFromPEM(ca.CertPEM())
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}
	tr.TLSClientConfig = tlsConfig(trust)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func TestCredentialAdded(t *testing.T) {
	t.Parallel()
	for _, tlsOn := range []bool{false, true} {
		name := map[bool]string{false: "http", true: "https"}[tlsOn]
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var got []string
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				got = append(got, r.Header.Get("Authorization")+"|"+string(body))
				mu.Unlock()
				io.WriteString(w, "pushed")
			})
			up := httptest.NewUnstartedServer(h)
			if tlsOn {
				up.StartTLS()
			} else {
				up.Start()
			}
			defer up.Close()
			var kinds []string
			allowCred := true
			client := credProxy(t, up, func(r egress.Request) egress.Verdict {
				mu.Lock()
				defer mu.Unlock()
				kinds = append(kinds, r.Kind+":"+r.Credential)
				if r.Kind == egress.KindCredential && !allowCred {
					return egress.Verdict{Reason: "denied by c1"}
				}
				return egress.Verdict{Allowed: true, Rule: r.AllowedBy}
			})
			u := strings.Replace(up.URL, "127.0.0.1", "127.0.0.1", 1) + "/repo.git/git-receive-pack"
			resp, err := client.Post(u, "text/plain", strings.NewReader("objects"))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "pushed" {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
			mu.Lock()
			allowCred = false
			if len(got) != 1 || got[0] != "Bearer host-held-secret|objects" {
				t.Fatalf("upstream saw %q", got)
			}
			if len(kinds) != 2 || kinds[0] != "egress:api" || kinds[1] != "credential:api" {
				t.Fatalf("checks %q", kinds)
			}
			mu.Unlock()
			resp, err = client.Post(u, "text/plain", strings.NewReader("again"))
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "denied by c1") {
				t.Fatalf("denied use: %d %q", resp.StatusCode, body)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 {
				t.Fatalf("denied request reached the upstream: %q", got)
			}
		})
	}
}

// TestCheckHolds: a request waits for Check and is refused with its reason.
func TestCheckHolds(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("refused request reached the upstream")
	}))
	defer up.Close()
	release := make(chan struct{})
	client := credProxy(t, up, func(r egress.Request) egress.Verdict {
		select {
		case <-release:
		case <-time.After(30 * time.Second):
		}
		return egress.Verdict{Reason: "no answer within 1s"}
	})
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := client.Get(up.URL + "/x")
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	select {
	case <-done:
		t.Fatal("request was not held")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	select {
	case resp := <-done:
		if resp == nil {
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "no answer within 1s") {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("held request never answered")
	}
}
