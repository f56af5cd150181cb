package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// reap runs until the fleet stops: every ReapInterval it recycles the
// sandboxes past their maximum lifetime, suspends those idle for their idle
// TTL, replaces those whose image was updated, and removes the threads
// suspended for ThreadTTL. It is started by New and waited for by Stop.
func (f *Fleet) reap() {
	defer f.bg.Done()
	f.every(f.cfg.ReapInterval, f.reapOnce)
}

// plannedTimeout bounds waiting for a box's threads to replace the sandbox
// the reaper stopped (recycle): past it the reaper decides again.
const plannedTimeout = agentReadyTimeout + 3*cleanupTimeout

// reapAction is what the reaper does with one box.
type reapAction int

const (
	reapNone    reapAction = iota
	reapExpire             // remove the box: it has no threads
	reapRecycle            // new sandbox, same volume, threads go on
	reapSuspend            // no sandbox; threads suspended
)

// reapOnce handles what is due at now. It blocks for the engine.
func (f *Fleet) reapOnce(now time.Time) {
	type due struct {
		b   *Box
		act reapAction
		ev  wire.SandboxExited
	}
	var todo []due
	f.mu.Lock()
	for _, b := range f.boxes {
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
		if act, ev := f.decide(b, now); act != reapNone {
			todo = append(todo, due{b, act, ev})
		}
	}
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(f.ctx, 2*cleanupTimeout)
	defer cancel()
	for _, d := range todo {
		var err error
		switch d.act {
		case reapExpire:
			err = f.expire(ctx, d.b, d.ev)
		case reapRecycle:
			f.recycle(ctx, d.b, d.ev) // lifecycle.go
		case reapSuspend:
			err = f.suspend(ctx, d.b, d.ev) // suspend.go
		}
		if err != nil {
			f.log.Error("reap sandbox", "box", d.b.id, "reason", d.ev.Reason, "err", err)
		}
	}
	f.checkImages(ctx) // imageupdate.go
	f.retire(ctx, now) // suspend.go
}

// decide says what is due for b at now. A box whose threads work (a turn
// or tool call runs) counts as used; past its maximum lifetime it waits for
// the work to end, up to RecycleGrace. The caller holds f.mu.
func (f *Fleet) decide(b *Box, now time.Time) (reapAction, wire.SandboxExited) {
	busy := f.boxBusy(b) // lifecycle.go
	if busy || f.inUse(b) {
		b.lastUsed = now
	}
	switch {
	case !now.Before(b.expires):
		if len(b.members) == 0 {
			return reapExpire, wire.SandboxExited{Reason: wire.ExitLifetime,
				Message: fmt.Sprintf("sandbox removed: it reached its maximum lifetime of %v", f.cfg.MaxLifetime)}
		}
		if busy {
			if b.dueSince.IsZero() {
				b.dueSince = now
				f.log.Info("sandbox past its maximum lifetime waits for its work to end", "box", b.id, "grace", f.cfg.RecycleGrace)
			}
			if now.Sub(b.dueSince) < f.cfg.RecycleGrace {
				return reapNone, wire.SandboxExited{}
			}
		}
		msg := fmt.Sprintf("sandbox recycled: it reached its maximum lifetime of %v", f.cfg.MaxLifetime)
		if busy {
			msg += fmt.Sprintf("; the running work was interrupted after a grace of %v", f.cfg.RecycleGrace)
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
// caller holds f.mu.
func (f *Fleet) inUse(b *Box) bool {
	for _, m := range b.members {
		if m.Attached() {
			return true
		}
	}
	return false
}

// expire removes b, a box without members: the sandbox, its proxies and
// folder, and its workspace volume unless a suspended thread still owns it.
func (f *Fleet) expire(ctx context.Context, b *Box, ev wire.SandboxExited) error {
	f.mu.Lock()
	if b.gone || len(b.members) > 0 {
		f.mu.Unlock()
		return nil
	}
	b.gone = true
	if f.boxes[b.key] == b {
		delete(f.boxes, b.key)
	}
	f.mu.Unlock()
	f.log.Info("sandbox expired", "box", b.id, "reason", ev.Reason)
	res := b.res.keepingVolume()
	err := res.remove(ctx, f.cfg.Manager)
	// pool.go: there may be room for a pooled sandbox again.
	f.wakePool()
	return errors.Join(err, f.DropVolumeIfUnused(ctx, b.id)) // suspend.go
}
