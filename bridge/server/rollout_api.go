package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Rollouts (docs/lifecycle.md "Rollouts"): the admin routes that show and
// pause the move of live sandboxes to a rebuilt image, and reloading the
// image allowlist (Run, on Config.Reload), are bridge/rollout's over the
// server's fleet (Server.roll); moving one thread to another image (PATCH
// /v1/threads/{id} "image", egress_update.go) is here. The pace and the
// moves themselves are bridge/fleet's (rollout.go).

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

// writeMoveError answers a refused or failed moveImage.
func (s *Server) writeMoveError(w http.ResponseWriter, id string, err error) {
	var werr wire.Error
	switch {
	case errors.Is(err, errNoThread):
		httpjson.NotFound(w, id)
	case errors.As(err, &werr):
		status, env := httpError(err)
		httpjson.Error(w, status, env.Code, env.Message)
	default:
		s.log.Error("change thread image", "thread", id, "err", err)
		httpjson.Error(w, http.StatusInternalServerError, wire.CodeInternal, err.Error())
	}
}
