package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// reap runs until the server closes: every ReapInterval it removes the
// sandboxes whose maximum lifetime or idle TTL has passed, telling their
// clients why. It is started by New and waited for by Close.
func (s *Server) reap() {
	defer s.reaper.Done()
	ticker := time.NewTicker(s.cfg.ReapInterval)
	defer ticker.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-ticker.C:
			s.reapOnce(now)
		}
	}
}

// reapOnce expires what is due at now.
func (s *Server) reapOnce(now time.Time) {
	type due struct {
		b  *box
		ev wire.SandboxExited
	}
	var expired []due
	s.mu.Lock()
	for _, b := range s.boxes {
		select {
		case <-b.ready:
		default:
			continue // still being created
		}
		if b.err != nil {
			continue
		}
		if s.inUse(b) {
			b.lastUsed = now
		}
		switch {
		case !now.Before(b.expires):
			expired = append(expired, due{b, wire.SandboxExited{Reason: wire.ExitLifetime,
				Message: fmt.Sprintf("sandbox removed: it reached its maximum lifetime of %v", s.cfg.MaxLifetime)}})
		case now.Sub(b.lastUsed) >= b.idleTTL:
			expired = append(expired, due{b, wire.SandboxExited{Reason: wire.ExitIdle,
				Message: fmt.Sprintf("sandbox removed: idle for %v", b.idleTTL)}})
		}
	}
	s.mu.Unlock()
	for _, d := range expired {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		if err := s.expire(ctx, d.b, d.ev); err != nil {
			s.log.Error("remove expired sandbox", "box", d.b.id, "err", err)
		}
		cancel()
	}
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

// expire removes b and its threads: each thread logs ev and closes its
// clients with it; then the sandbox, its volume, proxy and folder go.
func (s *Server) expire(ctx context.Context, b *box, ev wire.SandboxExited) error {
	s.mu.Lock()
	if b.gone {
		s.mu.Unlock()
		return nil
	}
	b.gone = true
	if s.boxes[b.key] == b {
		delete(s.boxes, b.key)
	}
	threads := make([]*thread, 0, len(b.threads))
	for id, t := range b.threads {
		threads = append(threads, t)
		if s.threads[id] == t {
			delete(s.threads, id)
		}
	}
	s.mu.Unlock()
	s.log.Info("sandbox expired", "box", b.id, "reason", ev.Reason)
	var errs []error
	for _, t := range threads {
		final := t.logEvent(wire.MustNew(wire.TypeSandboxExited, t.id, "", ev))
		t.shutdown(final)
		errs = append(errs, s.cfg.Store.Delete(ctx, t.id))
	}
	errs = append(errs, b.res.remove(ctx, s.cfg.Manager))
	return errors.Join(errs...)
}
