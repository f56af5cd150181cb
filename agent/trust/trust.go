package trust

import (
	"fmt"
	"os"
	"path/filepath"
)

// SystemBundle is Debian's CA bundle.
const SystemBundle = "/etc/ssl/certs/ca-certificates.crt"

// Env writes <dir>/ca-bundle.pem (system roots from systemBundle, which may
// be missing, followed by the CA at caPath) and returns SSL_CERT_FILE,
// GIT_SSL_CAINFO, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE pointing at it and
// NODE_EXTRA_CA_CERTS at caPath. An empty caPath returns nothing.
func Env(caPath, systemBundle, dir string) ([]string, error) {
	if caPath == "" {
		return nil, nil
	}
	ca, err := os.ReadFile(caPath)
	if err != nil {
		return nil, fmt.Errorf("read egress ca: %w", err)
	}
	sys, _ := os.ReadFile(systemBundle) // no system roots: the CA alone
	if len(sys) > 0 && sys[len(sys)-1] != '\n' {
		sys = append(sys, '\n')
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ca bundle: %w", err)
	}
	bundle := filepath.Join(dir, "ca-bundle.pem")
	if err := os.WriteFile(bundle, append(sys, ca...), 0o644); err != nil {
		return nil, fmt.Errorf("ca bundle: %w", err)
	}
	return []string{
		"SSL_CERT_FILE=" + bundle,
		"GIT_SSL_CAINFO=" + bundle,
		"REQUESTS_CA_BUNDLE=" + bundle,
		"CURL_CA_BUNDLE=" + bundle,
		"NODE_EXTRA_CA_CERTS=" + caPath,
	}, nil
}
