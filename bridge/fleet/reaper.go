package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet/greet"
	"github.com/boxwire/boxwire/bridge/wire"
)

// reaper is the fleet's reaper: its loop (reap, started by New and waited
// for by Stop) and what it decides for each box, on the fleet's boxes
// under the fleet's lock.
type reaper struct{ f *Fleet }

// reap runs until the fleet stops: every ReapInterval it recycles the
// sandboxes past their maximum lifetime, suspends those idle for their idle
// TTL, replaces those whose image was updated, and removes the threads
// suspended for ThreadTTL. It is started by New and waited for by Stop.
func (rp *reaper) reap() {
	defer rp.f.bg.Done()
	every(rp.f.ctx, rp.f.cfg.ReapInterval, rp.reapOnce)
}

// plannedTimeout bounds waiting for a box's threads to replace the sandbox
// the reaper stopped (recycle): past it the reaper decides again.
const plannedTimeout = greet.ReadyTimeout + 3*cleanupTimeout

// reapAction is what the reaper does with one box.
type reapAction int

const (
	reapNone    reapAction = iota
	reapExpire             // remove the box: it has no threads
	reapRecycle            // new sandbox, same volume, threads go on
	reapSuspend            // no sandbox; threads suspended
)

// reapOnce handles what is due at now. It blocks for the engine.
func (rp *reaper) reapOnce(now time.Time) {
	type due struct {
		b   *Box
		act reapAction
		ev  wire.SandboxExited
	}
	var todo []due
	rp.f.mu.Lock()
	for _, b := range rp.f.boxes {
		select {
		case <-b.ready:
		default:
			continue // still being created
		}
		if b.err != nil || b.planned != nil && now.Sub(b.plannedAt) < plannedTimeout {
			continue // a recycle under way
		}
		if b.joining > 0 {
			continue // a thread is starting in it (Acquire)
		}
		b.planned = nil // no thread took the recycle up (their agent links were down): decide again
		if act, ev := rp.decide(b, now); act != reapNone {
			todo = append(todo, due{b, act, ev})
		}
	}
	rp.f.mu.Unlock()
	ctx, cancel := context.WithTimeout(rp.f.ctx, 2*cleanupTimeout)
	defer cancel()
	for _, d := range todo {
		var err error
		switch d.act {
		case reapExpire:
			err = rp.expire(ctx, d.b, d.ev)
		case reapRecycle:
			rp.f.rep.recycle(ctx, d.b, d.ev) // lifecycle.go
		case reapSuspend:
			err = rp.suspend(ctx, d.b, d.ev) // suspend.go
		}
		if err != nil {
			rp.f.log.Error("reap sandbox", "box", d.b.id, "reason", d.ev.Reason, "err", err)
		}
	}
	rp.checkImages(ctx) // imageupdate.go
	rp.retire(ctx, now) // suspend.go
}

// decide says what is due for b at now. A box whose threads work (a turn
// or tool call runs) counts as used; past its maximum lifetime it waits for
// the work to end, up to RecycleGrace. The caller holds rp.f.mu.
func (rp *reaper) decide(b *Box, now time.Time) (reapAction, wire.SandboxExited) {
	busy := b.busy() // lifecycle.go
	if busy || rp.inUse(b) {
		b.lastUsed = now
	}
	switch {
	case b.foreign && b.scope == wire.ScopeAssistant && len(b.members) == 0:
		// handover.go: a shared sandbox taken over from another bridge
		// goes with the last of its threads; no new thread joins it.
		return reapExpire, wire.SandboxExited{Reason: wire.ExitIdle,
			Message: "sandbox removed: the threads it was taken over with are gone"}
	case !now.Before(b.expires):
		if len(b.members) == 0 {
			return reapExpire, wire.SandboxExited{Reason: wire.ExitLifetime,
				Message: fmt.Sprintf("sandbox removed: it reached its maximum lifetime of %v", rp.f.cfg.MaxLifetime)}
		}
		if busy {
			if b.dueSince.IsZero() {
				b.dueSince = now
				rp.f.log.Info("sandbox past its maximum lifetime waits for its work to end", "box", b.id, "grace", rp.f.cfg.RecycleGrace)
			}
			if now.Sub(b.dueSince) < rp.f.cfg.RecycleGrace {
				return reapNone, wire.SandboxExited{}
			}
		}
		msg := fmt.Sprintf("sandbox recycled: it reached its maximum lifetime of %v", rp.f.cfg.MaxLifetime)
		if busy {
			msg += fmt.Sprintf("; the running work was interrupted after a grace of %v", rp.f.cfg.RecycleGrace)
		}
		return reapRecycle, wire.SandboxExited{Reason: wire.ExitLifetime, Message: msg}
	case now.Sub(b.lastUsed) >= b.idleTTL:
		if len(b.members) == 0 {
			return reapExpire, wire.SandboxExited{Reason: wire.ExitIdle,
				Message: fmt.Sprintf("sandbox removed: idle for %v", b.idleTTL)}
		}
		return reapSuspend, wire.SandboxExited{Reason: wire.ExitIdle,
			Message: fmt.Sprintf("sandbox stopped: idle for %v; the thread is suspended and resumes with its workspace and conversation on the next attach", b.idleTTL)}
	}
	return reapNone, wire.SandboxExited{}
}

// inUse reports whether a client is attached to one of b's members. The
// caller holds rp.f.mu.
func (rp *reaper) inUse(b *Box) bool {
	for _, m := range b.members {
		if m.Attached() {
			return true
		}
	}
	return false
}

// expire removes b, a box without members: the sandbox, its proxies and
// folder, and its workspace volume unless a suspended thread still owns it.
func (rp *reaper) expire(ctx context.Context, b *Box, ev wire.SandboxExited) error {
	rp.f.mu.Lock()
	if b.gone || len(b.members) > 0 {
		rp.f.mu.Unlock()
		return nil
	}
	b.gone = true
	if rp.f.boxes[b.key] == b {
		delete(rp.f.boxes, b.key)
	}
	rp.f.mu.Unlock()
	rp.f.log.Info("sandbox expired", "box", b.id, "reason", ev.Reason)
	res := b.res.keepingVolume()
	err := res.remove(ctx, rp.f.cfg.Manager)
	// there may be room for a pooled sandbox again.
	rp.f.pool.Wake()
	return errors.Join(err, rp.f.DropVolumeIfUnused(ctx, b.id)) // suspend.go
}
