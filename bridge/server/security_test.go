package server_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/wire"
)

// TestPostureForRuntime checks that each sandbox's posture is judged under
// its own runtime: runsc shows no seccomp filter of the engine's and is
// not refused for it; every other runtime must show one.
func TestPostureForRuntime(t *testing.T) {
	const none = "0000000000000000"
	strong := wire.Posture{UID: 1000, GID: 1000, CapEff: none, CapBnd: none, NoNewPrivs: true,
		Seccomp: 2, ReadOnlyRoot: true, PidsMax: 512, MemoryMaxBytes: 1 << 30}
	noFilter := strong
	noFilter.Seccomp = 0
	gvisor := noFilter // what runsc shows from inside
	gvisor.NoNewPrivs, gvisor.PidsMax, gvisor.MemoryMaxBytes = false, 0, 0
	root := strong
	root.UID = 0
	cases := []struct {
		name    string
		policy  *server.PosturePolicy
		runtime string
		posture *wire.Posture
		refused string // "" = accepted
	}{
		{"runc with filter", server.StrictPosture(), "", &strong, ""},
		{"runc without filter", server.StrictPosture(), "runc", &noFilter, "seccomp mode 0"},
		{"default runtime without filter", server.StrictPosture(), "", &noFilter, "seccomp mode 0"},
		{"runsc without filter", server.StrictPosture(), "runsc", &noFilter, ""},
		{"runsc as gVisor shows it", server.StrictPosture(), "runsc", &gvisor, ""},
		{"runc as gVisor would show it", server.StrictPosture(), "", &gvisor, "no_new_privs"},
		{"runsc still needs the rest", server.StrictPosture(), "runsc", &root, "runs as uid 0"},
		{"no posture reported", server.StrictPosture(), "runsc", nil, "reported no posture"},
		{"nil policy", nil, "runsc", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.ForRuntime(tc.runtime).Check(tc.posture)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var werr wire.Error
			if !errors.As(err, &werr) || werr.Code != wire.CodeSandboxUnavailable || !strings.Contains(werr.Message, tc.refused) {
				t.Fatalf("got %v, want sandbox_unavailable naming %q", err, tc.refused)
			}
		})
	}
	pol := server.StrictPosture()
	if pol.ForRuntime("runsc").Seccomp || !pol.Seccomp {
		t.Fatal("ForRuntime(runsc) must return a copy without seccomp and leave its receiver alone")
	}
}
