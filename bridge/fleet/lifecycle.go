package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// inspectWait bounds asking the engine why a sandbox went away; the
// engine may report the exit a moment after the socket closes.
const inspectWait = 3 * time.Second

// replacer replaces the sandboxes of the fleet's boxes: on purpose
// (recycle: maximum lifetime, image update) or for a member whose sandbox
// went away (recreate), and finds out why a shared one stopped
// (sharedExit). It keeps no state of its own beyond Box's replacement
// fields, under the fleet's lock.
type replacer struct{ f *Fleet }

// busy reports whether any member of b is working. The caller holds the
// Fleet's mutex.
func (b *Box) busy() bool {
	for _, m := range b.members {
		if m.Working() {
			return true
		}
	}
	return false
}

// Linked records that member id's agent link talks to sandbox sb.
func (f *Fleet) Linked(b *Box, id, sb string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b.linked == nil {
		b.linked = map[string]string{}
	}
	b.linked[id] = sb
}

// LossCause says why member id's agent connection to b ended, when the
// fleet knows: it removed the sandbox on purpose (maximum lifetime, image
// update), another member already replaced the shared sandbox, or a
// shared (assistant) sandbox stopped (it asks the engine, until ctx ends
// or at most inspectWait). known is false when the member's own handling
// applies (a thread-scope sandbox that died, or a connection lost while
// the sandbox runs). The member then publishes ev and calls Replace.
func (f *Fleet) LossCause(ctx context.Context, b *Box, id string) (ev wire.SandboxExited, known bool) {
	f.mu.Lock()
	old, cur := b.linked[id], b.res.sandbox()
	planned, last := b.planned, b.lastReplace
	f.mu.Unlock()
	switch {
	case planned != nil && (old == "" || old == cur):
		return *planned, true
	case old != "" && old != cur:
		return last, true
	case b.scope == wire.ScopeAssistant:
		return f.rep.sharedExit(ctx, b, old)
	}
	return wire.SandboxExited{}, false
}

// sharedExit polls the engine briefly about old, the shared sandbox of b a
// member's agent ran in: it reports why it stopped, or why another member
// already replaced it; stopped is false when it seems to run on.
func (rep replacer) sharedExit(ctx context.Context, b *Box, old string) (ev wire.SandboxExited, stopped bool) {
	f := rep.f
	ctx, cancel := context.WithTimeout(ctx, inspectWait)
	defer cancel()
	current := func() (string, wire.SandboxExited) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return b.res.sandbox(), b.lastReplace
	}
	for {
		cur, last := current()
		if old != "" && cur != old {
			return last, true
		}
		sb, err := f.cfg.Manager.Inspect(ctx, cur)
		switch {
		case err == nil && !sb.Running:
			return ExitEvent(sb), true
		case errors.Is(err, sandbox.ErrNotFound):
			b.recreateMu.Lock() // another member's recreate, if one removed it, is over
			b.recreateMu.Unlock()
			if cur, last = current(); old != "" && cur != old {
				return last, true
			}
			return wire.SandboxExited{Reason: wire.ExitDied, Message: "sandbox stopped: it was removed"}, true
		}
		select {
		case <-ctx.Done():
			return wire.SandboxExited{}, false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Replace gives member id of b a sandbox newer than the one its link
// talked to, on the same workspace volume, folders and proxies (made once
// for all the members of a shared box, see recreate), with its agent
// greeted; the caller hands it the history and calls Linked. It blocks for
// the engine and the agent, at most until ctx ends.
func (f *Fleet) Replace(ctx context.Context, b *Box, id string, why wire.SandboxExited) (sandboxID string, conn *websocket.Conn, err error) {
	f.mu.Lock()
	old := b.linked[id]
	f.mu.Unlock()
	sbID, err := f.rep.recreate(ctx, b, old, why)
	if err != nil {
		return "", nil, err
	}
	conn, err = f.Greet(ctx, b, id)
	if err != nil {
		return "", nil, err
	}
	return sbID, conn, nil
}

// recycle removes b's sandbox on purpose (why: maximum lifetime, image
// update) so that each of its members replaces it (LossCause, Replace); a
// box without members gets its new sandbox at once. It blocks for the
// engine's removal.
func (rep replacer) recycle(ctx context.Context, b *Box, why wire.SandboxExited) {
	f := rep.f
	f.mu.Lock()
	if b.gone || b.planned != nil {
		f.mu.Unlock()
		return
	}
	n := len(b.members)
	if n > 0 {
		b.planned, b.plannedAt = &why, time.Now()
	}
	b.dueSince = time.Time{}
	old := b.res.sandbox()
	f.mu.Unlock()
	f.log.Info("recycling sandbox", "box", b.id, "reason", why.Reason, "threads", n, "why", why.Message)
	if n == 0 {
		if _, err := f.rep.recreate(ctx, b, old, why); err != nil {
			f.log.Error("recycle sandbox", "box", b.id, "err", err)
		}
		return
	}
	// A kill, not a removal: the member's replacement removes it, and the
	// engine refuses two removals of one container at once.
	if err := f.cfg.Manager.Stop(ctx, old, 0); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		f.log.Error("stop sandbox to recycle it", "box", b.id, "err", err)
	}
}

// recreate makes b run a sandbox newer than old, on the same workspace
// volume, socket folder and proxies: the first caller for old removes it
// and creates the next one; later callers (the other members of a shared
// sandbox) find it done. It returns the current sandbox id. A recycle for
// the maximum lifetime starts a new lifetime. It blocks for the engine.
func (rep replacer) recreate(ctx context.Context, b *Box, old string, why wire.SandboxExited) (string, error) {
	f := rep.f
	b.recreateMu.Lock()
	defer b.recreateMu.Unlock()
	if cur := b.res.sandbox(); old != "" && cur != old {
		return cur, nil
	}
	if err := f.rep.removeRetrying(ctx, b.res.sandbox()); err != nil {
		return "", fmt.Errorf("remove the old sandbox: %w", err)
	}
	f.px.FreshTokens(b.id) // the old sandbox's LLM tokens are refused from now on (boxproxy/tokens.go)
	f.mu.Lock()
	now := time.Now().UTC().Truncate(time.Second)
	if why.Reason == wire.ExitLifetime || !now.Before(b.expires) {
		b.created, b.expires = now, now.Add(f.cfg.MaxLifetime)
	}
	b.planned, b.lastReplace, b.dueSince = nil, why, time.Time{}
	b.moving = false // rollout.go: the next sandbox runs the image it was moved to
	f.mu.Unlock()
	sb, err := f.cfg.Manager.Create(ctx, f.spec(b))
	if err != nil {
		return "", fmt.Errorf("create sandbox: %w", err)
	}
	b.res.setSandbox(sb.ID)
	f.rep.recordImage(ctx, b)
	f.log.Info("sandbox recreated", "box", b.id, "sandbox", sb.ID, "reason", why.Reason)
	return sb.ID, nil
}

// removeRetrying removes sandbox id, trying again for a few seconds while
// the engine refuses (a removal already in progress, a container still
// stopping).
func (rep replacer) removeRetrying(ctx context.Context, id string) error {
	f := rep.f
	var err error
	for range 10 {
		if err = f.cfg.Manager.Remove(ctx, id); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(300 * time.Millisecond):
		}
	}
	return err
}

// recordImage notes the image id b's sandbox runs, when the manager can
// tell (sandbox.ImageResolver).
func (rep replacer) recordImage(ctx context.Context, b *Box) {
	f := rep.f
	res, ok := f.cfg.Manager.(sandbox.ImageResolver)
	if !ok {
		return
	}
	id, err := res.SandboxImageID(ctx, b.res.sandbox())
	if err != nil {
		f.log.Warn("image id of sandbox", "box", b.id, "err", err)
		return
	}
	f.mu.Lock()
	b.imageID = id
	f.mu.Unlock()
}

// ExitEvent describes a stopped sandbox for its clients. Exit code 137
// without the engine's OOM flag is reported as a likely out-of-memory kill:
// the engine flags only kills of the container's main process, and a child
// killed by the OOM killer shows up as exit 137 (SIGKILL).
func ExitEvent(sb sandbox.Sandbox) wire.SandboxExited {
	code := sb.ExitCode
	ev := wire.SandboxExited{Reason: wire.ExitDied, ExitCode: &code, OOMKilled: sb.OOMKilled}
	switch {
	case sb.OOMKilled:
		ev.Reason = wire.ExitOOM
		ev.Message = fmt.Sprintf("sandbox stopped: exit code %d, killed for running out of memory", code)
	case code == 137:
		ev.Reason = wire.ExitOOM
		ev.Message = "sandbox stopped: exit code 137 (killed; likely out of memory)"
	default:
		ev.Message = fmt.Sprintf("sandbox stopped: exit code %d", code)
	}
	return ev
}
