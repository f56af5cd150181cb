package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Rollouts (docs/lifecycle.md "Rollouts"): the admin routes that show and
// pause the move of live sandboxes to a rebuilt image, moving one thread
// to another image (PATCH /v1/threads/{id} "image", egress_update.go), and
// reloading the image allowlist (Run, on Config.Reload). The pace and the
// moves themselves are bridge/fleet's (rollout.go).

// maxRolloutBody bounds a POST /v1/rollout body.
const maxRolloutBody = 4 << 10

// rolloutRoutes mounts GET and POST /v1/rollout for admins.
func (s *Server) rolloutRoutes(mux *http.ServeMux) {
	mux.Handle("GET /v1/rollout", s.admin(http.HandlerFunc(s.getRollout)))
	mux.Handle("POST /v1/rollout", s.admin(s.audited("rollout.update", http.HandlerFunc(s.postRollout))))
}

// getRollout answers GET /v1/rollout: fleet.RolloutStatus, the images in
// use, how many sandboxes and threads run each and how many are behind.
func (s *Server) getRollout(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.fleet.Rollout())
}

// postRollout answers POST /v1/rollout {"paused": true|false}: pauses or
// resumes the rollout, and answers with its status.
func (s *Server) postRollout(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Paused *bool `json:"paused"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRolloutBody))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err == nil && req.Paused == nil {
		err = errors.New("paused is required")
	}
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, wire.CodeBadMessage, "body: "+err.Error())
		return
	}
	s.fleet.PauseRollout(*req.Paused)
	writeJSON(w, http.StatusOK, s.fleet.Rollout())
}

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
		writeJSONError(w, http.StatusNotFound, wire.CodeNotFound, fmt.Sprintf("thread %q not found", id))
	case errors.As(err, &werr):
		status, env := httpError(err)
		writeJSONError(w, status, env.Code, env.Message)
	default:
		s.log.Error("change thread image", "thread", id, "err", err)
		writeJSONError(w, http.StatusInternalServerError, wire.CodeInternal, err.Error())
	}
}

// reloadImages asks Config.ReloadImages for the images a thread may use
// besides the default and gives them to the fleet; an error keeps the
// ones it had. Run calls it on every Config.Reload.
func (s *Server) reloadImages() {
	if s.cfg.ReloadImages == nil {
		s.log.Info("reload: nothing to reload")
		return
	}
	images, err := s.cfg.ReloadImages()
	if err != nil {
		s.log.Error("reload the image allowlist; keeping the old one", "err", err)
		return
	}
	s.fleet.SetImages(images)
	s.log.Info("image allowlist reloaded", "image", s.cfg.Image, "images", images)
}
