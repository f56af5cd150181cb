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
