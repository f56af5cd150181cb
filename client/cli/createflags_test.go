package cli_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/cli"
)

func TestCreateFlags(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"rules":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	mcp := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(mcp, []byte(`{"servers":[{"name":"docs","command":["docs-mcp"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(notJSON, []byte(`rules: []`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args    []string
		want    *wire.CreateThread
		move    string // the image an existing thread moves to
		wantErr string
	}{
		{args: nil, want: nil},
		{args: []string{"--image", "boxwire:x"},
			want: &wire.CreateThread{Image: "boxwire:x"}, move: "boxwire:x"},
		{args: []string{"--image", "boxwire:x", "--runtime", "runsc"},
			want: &wire.CreateThread{Image: "boxwire:x", Runtime: "runsc"}},
		{args: []string{"--assistant", "a1", "--ttl", "5m"},
			want: &wire.CreateThread{Scope: wire.ScopeAssistant, Assistant: "a1", TTL: "5m"}},
		{args: []string{"--egress", " pypi.org, .github.com ,,"},
			want: &wire.CreateThread{Egress: []string{"pypi.org", ".github.com"}}},
		{args: []string{"--policy", policy},
			want: &wire.CreateThread{Policy: []byte(`{"rules":[]}`)}},
		{args: []string{"--mcp", mcp, "--image", "boxwire:x"},
			want: &wire.CreateThread{Image: "boxwire:x", MCP: []byte(`{"servers":[{"name":"docs","command":["docs-mcp"]}]}`)}},
		{args: []string{"--ttl", "soon"}, wantErr: `--ttl "soon"`},
		{args: []string{"--mcp", notJSON}, wantErr: "--mcp " + notJSON + ": not JSON"},
		{args: []string{"--policy", notJSON}, wantErr: "not JSON"},
		{args: []string{"--policy", filepath.Join(t.TempDir(), "missing")}, wantErr: "--policy"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got, move, err := cli.CreateRequest(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if move != tc.move {
				t.Errorf("move to %q, want %q", move, tc.move)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("request %+v, want %+v", got, tc.want)
			}
		})
	}
}
