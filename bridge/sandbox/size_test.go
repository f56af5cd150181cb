package sandbox_test

import (
	"testing"

	"github.com/boxwire/boxwire/bridge/sandbox"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "0", want: 0},
		{in: "1048576", want: 1 << 20},
		{in: "10GiB", want: 10 << 30},
		{in: "64MiB", want: 64 << 20},
		{in: "64mib", want: 64 << 20},
		{in: "512m", want: 512 << 20},
		{in: "2g", want: 2 << 30},
		{in: "1.5GiB", want: 3 << 29},
		{in: "2GB", want: 2e9},
		{in: "100kB", want: 1e5},
		{in: "1TiB", want: 1 << 40},
		{in: " 16 MiB ", want: 16 << 20},
		{in: "12B", want: 12},
		{in: "", bad: true},
		{in: "GiB", bad: true},
		{in: "-1", bad: true},
		{in: "10 parsecs", bad: true},
		{in: "1.2.3G", bad: true},
		{in: "9999999999TiB", bad: true},
		{in: "1e3", bad: true},
	}
	for _, tt := range tests {
		got, err := sandbox.ParseSize(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("ParseSize(%q) = %d, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestWorkspaceSizeBounds(t *testing.T) {
	tests := []struct {
		bytes int64
		ok    bool
	}{
		{0, true},
		{sandbox.MinWorkspaceBytes, true},
		{sandbox.MinWorkspaceBytes - 1, false},
		{-1, false},
	}
	for _, tt := range tests {
		d, err := sandbox.NewDocker(sandbox.DockerConfig{Workspace: sandbox.WorkspaceConfig{Dir: t.TempDir(), Bytes: tt.bytes}})
		if err == nil {
			_ = d.Close()
		}
		if (err == nil) != tt.ok {
			t.Errorf("NewDocker with workspace size %d: err = %v, want ok=%v", tt.bytes, err, tt.ok)
		}
	}
}
