package fleet

import (
	"context"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/fleet/greet"
)

// AgentSocket is the name of the agent's socket in its folder, for
// boxdir.Dirs.DialAgent.
const AgentSocket = greet.AgentSocket

// ReplaceTimeout bounds a member's replacement of its sandbox (Replace:
// the old one's removal, the new one's creation and its agent's hello).
const ReplaceTimeout = greet.ReadyTimeout + 2*cleanupTimeout

// AgentBuild is what a sandbox's agent says of its build in its hello.
type AgentBuild = greet.AgentBuild

// PosturePolicy is what a sandbox's agent must report in its hello (see
// wire.Posture) for the bridge to use it; a weaker one is refused with
// sandbox_unavailable and the sandbox removed.
type PosturePolicy = greet.PosturePolicy

// StrictPosture requires everything the bridge configures.
func StrictPosture() *PosturePolicy { return greet.StrictPosture() }

// Greet polls the agent socket of b's current sandbox until the agent
// answers hello for thread threadID and takes its claim (greet.Greeter),
// the sandbox exits, greet.ReadyTimeout passes or ctx ends.
func (f *Fleet) Greet(ctx context.Context, b *Box, threadID string) (*websocket.Conn, error) {
	conn, _, err := b.res.greet(ctx, f.greeter, threadID, true)
	return conn, err
}

// Rejoin is Greet for a thread that may have spoken to the agent of b's
// current sandbox before (a shared sandbox taken over from another
// bridge): it also returns the instance the agent named in its hello
// (AgentBuild.Instance), which the caller compares with the thread's
// stored agent cursor.
func (f *Fleet) Rejoin(ctx context.Context, b *Box, threadID string) (*websocket.Conn, string, error) {
	conn, build, err := b.res.greet(ctx, f.greeter, threadID, true)
	return conn, build.Instance, err
}

// target is what the greeter greets of r.
func (r *resources) target() greet.Target {
	return greet.Target{Dirs: r.dirs, Runtime: r.runtime, SandboxID: r.sandbox}
}

// greet waits for the agent of r's sandbox (greet.Greeter.Wait; claim
// false: no LLM token, a pooled sandbox) and records the build it names.
func (r *resources) greet(ctx context.Context, g *greet.Greeter, threadID string, claim bool) (*websocket.Conn, AgentBuild, error) {
	conn, build, err := g.Wait(ctx, r.target(), threadID, claim)
	if err != nil {
		return nil, AgentBuild{}, err
	}
	r.setBuild(build)
	return conn, build, nil
}

// claim greets the agent of r's running sandbox, greeted before (a pooled
// one), once and claims it in one round trip (greet.Greeter.Claim), and
// records the build it names.
func (r *resources) claim(ctx context.Context, g *greet.Greeter, threadID string) (*websocket.Conn, error) {
	conn, build, err := g.Claim(ctx, r.target(), threadID, r.build())
	if err != nil {
		return nil, err
	}
	r.setBuild(build)
	return conn, nil
}
