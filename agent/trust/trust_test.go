package trust_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/boxwire/boxwire/agent/trust"
)

func TestEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	sys := filepath.Join(dir, "sys.pem")
	os.WriteFile(ca, []byte("CA\n"), 0o644)
	os.WriteFile(sys, []byte("SYS"), 0o644)
	env, err := trust.Env(ca, sys, filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "out", "ca-bundle.pem")
	for _, want := range []string{"SSL_CERT_FILE=" + bundle, "GIT_SSL_CAINFO=" + bundle, "REQUESTS_CA_BUNDLE=" + bundle, "NODE_EXTRA_CA_CERTS=" + ca} {
		if !slices.Contains(env, want) {
			t.Errorf("env %q lacks %q", env, want)
		}
	}
	if got, _ := os.ReadFile(bundle); string(got) != "SYS\nCA\n" {
		t.Fatalf("bundle %q", got)
	}
	if env, err := trust.Env("", sys, dir); env != nil || err != nil {
		t.Fatalf("no CA: %v %v", env, err)
	}
	if _, err := trust.Env(filepath.Join(dir, "missing"), sys, dir); err == nil {
		t.Fatal("missing CA accepted")
	}
}
