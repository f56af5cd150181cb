package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/sandbox/kube"
)

// --engine, --kubeconfig, --namespace and the Kubernetes workspace flags
// (and their BOXWIRE_ variables) reach the Kubernetes manager's
// configuration; a bad value is refused with the flag's name.
func TestEngineOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		env     map[string]string
		wantErr string
		check   func(kube.Config) bool
	}{
		{args: nil, check: func(c kube.Config) bool {
			return c.Namespace == kube.DefaultNamespace && c.Workspace == kube.WorkspaceClaim
		}},
		{args: []string{"--engine", "kubernetes", "--kubeconfig", "/k/config", "--namespace", "sandboxes", "--storage-class", "fast"},
			check: func(c kube.Config) bool {
				return c.Kubeconfig == "/k/config" && c.Namespace == "sandboxes" && c.StorageClass == "fast" && c.SeccompProfile == ""
			}},
		{env: map[string]string{"BOXWIRE_ENGINE": "kubernetes", "BOXWIRE_NAMESPACE": "ns1", "BOXWIRE_KUBE_WORKSPACE": "emptydir"},
			check: func(c kube.Config) bool { return c.Namespace == "ns1" && c.Workspace == kube.WorkspaceEmptyDir }},
		{args: []string{"--engine", "kubernetes", "--runtime", "gvisor", "--seccomp", "localhost/boxwire.json", "--workspace-size", "1GiB"},
			check: func(c kube.Config) bool {
				return c.RuntimeClass == "gvisor" && c.SeccompProfile == "boxwire.json" && c.WorkspaceSize == "1073741824"
			}},
		{args: []string{"--engine", "kubernetes", "--image-pull-policy", "Never"},
			check: func(c kube.Config) bool { return c.PullPolicy == "Never" }},
		{args: []string{"--engine", "kubernetes", "--image-pull-policy", "sometimes"}, wantErr: `--image-pull-policy "sometimes"`},
		{args: nil, check: func(c kube.Config) bool { return c.StartTimeout == kube.DefaultStartTimeout }},
		{env: map[string]string{"BOXWIRE_KUBE_START_TIMEOUT": "15s"}, check: func(c kube.Config) bool { return c.StartTimeout == 15*time.Second }},
		{args: []string{"--kube-start-timeout", "0s"}, wantErr: `--kube-start-timeout 0s`},
		{args: []string{"--engine", "podman"}, wantErr: `--engine "podman": want docker or kubernetes`},
		{args: []string{"--engine", "kubernetes", "--kube-workspace", "hostpath"}, wantErr: `--kube-workspace "hostpath"`},
		{args: []string{"--engine", "kubernetes", "--seccomp", "/etc/profile.json"}, wantErr: `--seccomp "/etc/profile.json" on kubernetes`},
	} {
		getenv := func(k string) string { return tc.env[k] }
		o, err := parseOptions("bridge", tc.args, getenv)
		var cfg kube.Config
		if err == nil {
			cfg, err = o.kubeConfig(slog.New(slog.DiscardHandler))
		}
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.wantErr)
		case tc.check != nil && err == nil && !tc.check(cfg):
			t.Errorf("%q: config %+v", tc.args, cfg)
		}
	}
}

// A bridge told to use a cluster that does not answer says so, naming the
// API server, and serves nothing.
func TestKubernetesEngineUnreachable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	// A server on a loopback port nothing listens on: port 1.
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parseOptions("bridge", []string{"--engine", "kubernetes", "--kubeconfig", kc}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = o.connectEngine(context.Background(), func(string) string { return "" }, slog.New(slog.DiscardHandler))
	if !errors.Is(err, sandbox.ErrEngineUnavailable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("connect to a cluster that does not answer: %v", err)
	}
	o.kubeconfig = filepath.Join(dir, "missing")
	if _, err := o.connectEngine(context.Background(), func(string) string { return "" }, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a kubeconfig that is not there: %v", err)
	}
}
