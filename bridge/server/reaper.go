package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// reap runs until the server closes: every ReapInterval it recycles the
// sandboxes past their maximum lifetime, suspends those idle for their idle
// TTL, replaces those whose image was updated, and removes the threads
// suspended for ThreadTTL. It is started by New and waited for by Close.
func (s *Server) reap() {
	defer s.reaper.Done()
	s.every(s.cfg.ReapInterval, s.reapOnce)
}

// every calls fn with the time every interval until the server closes.
func (s *Server) every(interval time.Duration, fn func(now time.Time)) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-ticker.C:
			fn(now)
		}
	}
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
func (s *Server) reapOnce(now time.Time) {
	type due struct {
		b   *box
		act reapAction
		ev  wire.SandboxExited
	}
	var todo []due
	s.mu.Lock()
	for _, b := range s.boxes {
		select {
		case <-b.ready:
		default:
			continue // still being created
		}
		if b.err != nil || b.planned != nil && now.Sub(b.plannedAt) < plannedTimeout {
			continue // a recycle under way
		}
		if b.joining > 0 {
			continue // a thread is starting in it (box.go)
		}
		b.planned = nil // no thread took the recycle up (their agent links were down): decide again
		if act, ev := s.decide(b, now); act != reapNone {
			todo = append(todo, due{b, act, ev})
		}
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, 2*cleanupTimeout)
	defer cancel()
	for _, d := range todo {
		var err error
		switch d.act {
		case reapExpire:
			err = s.expire(ctx, d.b, d.ev)
		case reapRecycle:
			s.recycle(ctx, d.b, d.ev) // lifecycle.go
		case reapSuspend:
			err = s.suspend(ctx, d.b, d.ev) // suspend.go
		}
		if err != nil {
			s.log.Error("reap sandbox", "box", d.b.id, "reason", d.ev.Reason, "err", err)
		}
	}
	s.checkImages(ctx) // imageupdate.go
	s.retire(ctx, now) // suspend.go
}

// decide says what is due for b at now. A box whose threads work (a turn
// or tool call runs) counts as used; past its maximum lifetime it waits for
// the work to end, up to RecycleGrace. The caller holds s.mu.
func (s *Server) decide(b *box, now time.Time) (reapAction, wire.SandboxExited) {
	busy := s.boxBusy(b) // lifecycle.go
	if busy || s.inUse(b) {
		b.lastUsed = now
	}
	switch {
	case !now.Before(b.expires):
		if len(b.threads) == 0 {
			return reapExpire, wire.SandboxExited{Reason: wire.ExitLifetime,
				Message: fmt.Sprintf("sandbox removed: it reached its maximum lifetime of %v", s.cfg.MaxLifetime)}
		}
		if busy {
			if b.dueSince.IsZero() {
				b.dueSince = now
				s.log.Info("sandbox past its maximum lifetime waits for its work to end", "box", b.id, "grace", s.cfg.RecycleGrace)
			}
			if now.Sub(b.dueSince) < s.cfg.RecycleGrace {
				return reapNone, wire.SandboxExited{}
			}
		}
		msg := fmt.Sprintf("sandbox recycled: it reached its maximum lifetime of %v", s.cfg.MaxLifetime)
		if busy {
			msg += fmt.Sprintf("; the running work was interrupted after a grace of %v", s.cfg.RecycleGrace)
		}
		return reapRecycle, wire.SandboxExited{Reason: wire.ExitLifetime, Message: msg}
	case now.Sub(b.lastUsed) >= b.idleTTL:
		if len(b.threads) == 0 {
			return reapExpire, wire.SandboxExited{Reason: wire.ExitIdle,
				Message: fmt.Sprintf("sandbox removed: idle for %v", b.idleTTL)}
		}
		return reapSuspend, wire.SandboxExited{Reason: wire.ExitIdle,
			Message: fmt.Sprintf("sandbox stopped: idle for %v; the thread is suspended and resumes with its workspace and conversation on the next attach", b.idleTTL)}
	}
	return reapNone, wire.SandboxExited{}
}

// inUse reports whether a client is attached to one of b's threads. The
// caller holds s.mu.
func (s *Server) inUse(b *box) bool {
	for _, t := range b.threads {
		t.mu.Lock()
		n := len(t.clients)
		t.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}

// expire removes b, a box without threads: the sandbox, its proxies and
// folder, and its workspace volume unless a suspended thread still owns it.
func (s *Server) expire(ctx context.Context, b *box, ev wire.SandboxExited) error {
	s.mu.Lock()
	if b.gone || len(b.threads) > 0 {
		s.mu.Unlock()
		return nil
	}
	b.gone = true
	if s.boxes[b.key] == b {
		delete(s.boxes, b.key)
	}
	s.mu.Unlock()
	s.log.Info("sandbox expired", "box", b.id, "reason", ev.Reason)
	res := b.res.keepingVolume()
	err := res.remove(ctx, s.cfg.Manager)
	// pool.go: there may be room for a pooled sandbox again.
	s.wakePool()
	return errors.Join(err, s.dropVolumeIfUnused(ctx, b.id)) // suspend.go
}
