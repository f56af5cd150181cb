package main

import (
	"strings"
	"testing"
)

// --tls-cert and --tls-key (BOXWIRE_TLS_CERT/KEY) go together and reach
// the server's config, as does --insecure-http.
func TestTLSOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		env     map[string]string
		wantErr string
	}{
		{args: nil},
		{args: []string{"--tls-cert", "c.pem", "--tls-key", "k.pem"}},
		{env: map[string]string{"BOXWIRE_TLS_CERT": "c.pem", "BOXWIRE_TLS_KEY": "k.pem"}},
		{args: []string{"--tls-cert", "c.pem"}, wantErr: "--tls-cert and --tls-key go together"},
		{env: map[string]string{"BOXWIRE_TLS_KEY": "k.pem"}, wantErr: "--tls-cert and --tls-key go together"},
		{args: []string{"--insecure-http"}},
	} {
		o, err := parseOptions("bridge", tc.args, func(k string) string { return tc.env[k] })
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v %v: %v", tc.args, tc.env, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v %v: err %v, want %q", tc.args, tc.env, err, tc.wantErr)
		case err == nil:
			if tc.args != nil && tc.args[0] == "--insecure-http" && !o.insecureHTTP {
				t.Errorf("--insecure-http not set")
			}
			if (tc.env["BOXWIRE_TLS_CERT"] == "c.pem" || len(tc.args) == 4) && (o.tlsCert != "c.pem" || o.tlsKey != "k.pem") {
				t.Errorf("%v %v: cert %q key %q", tc.args, tc.env, o.tlsCert, o.tlsKey)
			}
		}
	}
}

// --oidc-client-id needs --oidc-issuer; --oidc-audience defaults to it.
func TestOIDCLoginOptions(t *testing.T) {
	t.Parallel()
	if _, err := parseOptions("bridge", []string{"--oidc-client-id", "web"}, func(string) string { return "" }); err == nil ||
		!strings.Contains(err.Error(), "--oidc-client-id needs --oidc-issuer") {
		t.Fatalf("client id without issuer: %v", err)
	}
	o, err := parseOptions("bridge", []string{"--oidc-issuer", "https://id.example", "--oidc-client-id", "web"},
		func(k string) string { return map[string]string{"BOXWIRE_OIDC_CLIENT_SECRET": "s"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	if o.oidc.Audience != "web" || o.oidcLogin.Issuer != "https://id.example" || o.oidcLogin.ClientSecret != "s" {
		t.Fatalf("audience %q, login %+v", o.oidc.Audience, o.oidcLogin)
	}
	o, err = parseOptions("bridge", []string{"--oidc-issuer", "https://id.example", "--oidc-audience", "api", "--oidc-client-id", "web"}, func(string) string { return "" })
	if err != nil || o.oidc.Audience != "api" {
		t.Fatalf("an audience of its own: %q %v", o.oidc.Audience, err)
	}
}
