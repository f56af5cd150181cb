package server

import (
	"context"
	"fmt"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Rollouts (docs/lifecycle.md "Rollouts"): the admin routes that show and
// pause the move of live sandboxes to a rebuilt image, and reloading the
// image allowlist (Run, on Config.Reload), are bridge/rollout's over the
// server's fleet (Server.roll); moving one thread to another image (PATCH
// /v1/threads/{id} "image": bridge/threadapi's Patch) is here. The pace
// and the moves themselves are bridge/fleet's (rollout.go).

// moveImage moves thread id's sandbox to the allowed image (the whole
// shared sandbox in assistant scope), keeping workspace and conversation:
// a live idle one is replaced at once (sandbox_exited and
// sandbox_replaced, reason image_update), a busy one once its work ended,
// a suspended thread resumes on the new image. It describes the thread.
func (s *Server) moveImage(ctx context.Context, id, image string) (wire.ThreadInfo, error) {
	rec, stored, err := s.cfg.Store.Get(ctx, id)
	if err != nil {
		return wire.ThreadInfo{}, fmt.Errorf("read thread %s: %w", id, err)
	}
	var boxID string
	t := s.lookup(id)
	switch {
	case t != nil:
		boxID = t.box.ID()
	case stored:
		boxID = rec.Box
	default:
		return wire.ThreadInfo{}, errNoThread
	}
	prev, ids, err := s.fleet.MoveImage(ctx, boxID, image)
	if err != nil {
		return wire.ThreadInfo{}, err
	}
	s.log.Info("thread image changed", "thread", id, "box", boxID, "image", image, "previous", prev, "threads", ids)
	if t := s.lookup(id); t != nil {
		return s.info(ctx, t), nil
	}
	if rec, ok := s.suspendedRecord(ctx, id); ok {
		return s.suspendedInfo(rec), nil // suspend.go
	}
	return wire.ThreadInfo{}, errNoThread
}
