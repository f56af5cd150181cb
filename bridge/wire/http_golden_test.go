package wire_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// goldenHTTP are examples of the HTTP API's bodies (not envelopes), in
// testdata/http: the SDKs decode and re-encode each of them with their
// own codecs (client/typescript/test/golden.test.ts,
// client/python/tests/test_golden.py). Written with -update.
var goldenHTTP = []struct {
	name string
	body any
}{
	{"thread_info", wire.ThreadInfo{
		ID: "t_4f9c2a1b3c5d", Scope: wire.ScopeThread, Image: "boxwire:latest", Runtime: "runsc", Status: wire.SandboxRunning,
		SandboxID: "5e1c0ffee000", Created: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		Expires: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), IdleExpires: time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC),
		Clients: 1, Egress: []string{"pypi.org"}, ImageID: "sha256:9a8b7c6d5e4f", AgentVersion: "0.4.0", AgentHash: "sha256:1c2d3e4f",
		Owner: "alice",
		Posture: &wire.Posture{UID: 1000, GID: 1000, CapEff: "0000000000000000", CapBnd: "0000000000000000", NoNewPrivs: true,
			Seccomp: 2, ReadOnlyRoot: true, PidsMax: 512, MemoryMaxBytes: 2 << 30, CPUQuota: 2},
	}},
	{"thread_info_suspended", wire.ThreadInfo{
		ID: "t_0b7c4e2d9a1f", Scope: wire.ScopeAssistant, Assistant: "reviewer", Image: "python:3.12", Status: wire.SandboxSuspended,
		Created: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Expires: time.Date(2026, 12, 4, 9, 30, 0, 0, time.UTC),
		Suspended: func() *time.Time { t := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC); return &t }(), Owner: "bob",
	}},
	{"image_list", wire.ImageList{Default: "boxwire:latest", Images: []string{"boxwire:latest", "python:3.12"}}},
}

func TestGoldenHTTP(t *testing.T) {
	t.Parallel()
	for _, g := range goldenHTTP {
		t.Run(g.name, func(t *testing.T) {
			raw, err := json.MarshalIndent(g.body, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "http", g.name+".json"), append(raw, '\n'))
		})
	}
}
