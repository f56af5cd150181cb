package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Changing a thread's egress rules after it was created
// (PATCH /v1/threads/{id}, docs/egress-thread.md "Changing the rules").
// The rules belong to the sandbox (bridge/fleet), so a change applies to
// every thread of it: in assistant scope to the shared sandbox. The
// sandbox's egress proxy looks its rules up at every request, so it decides with the new ones from the next request
// on; the records of the sandbox's threads carry them, so a resumed,
// replaced or adopted sandbox keeps them. Every thread of the sandbox logs
// an egress_rules event.

// errNoThread: PATCH named a thread the bridge does not know.
var errNoThread = errors.New("no such thread")

// patchThread answers PATCH /v1/threads/{id}: {"egress": [...]} replaces
// the thread's sandbox's own egress rules (an empty list removes them),
// validated as on creation (fleet.ThreadEgress); {"image": "..."} moves
// the thread's sandbox to another allowed image, keeping workspace and
// conversation (rollout_api.go); a body may carry both. It answers 200
// with the thread's ThreadInfo, 400 for a body, rules or an image it
// refuses, 404 for an unknown thread. It blocks while the thread is being
// resumed or its sandbox suspended.
func (s *Server) patchThread(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req struct {
		Egress *[]string `json:"egress"` // wire.UpdateThread, with "missing" told from "empty"
		Image  *string   `json:"image"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCreateBody))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	switch {
	case err != nil:
	case req.Egress == nil && req.Image == nil:
		err = errors.New(`egress is required, or image (an empty egress list removes the thread's rules)`)
	case req.Image != nil && *req.Image == "":
		err = errors.New("image must name an allowed image")
	}
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, wire.CodeBadMessage, "body: "+err.Error())
		return
	}
	if _, ok, _ := s.cfg.Store.Get(r.Context(), id); !ok && s.lookup(id) == nil {
		httpjson.NotFound(w, id)
		return
	}
	if req.Image != nil {
		ctx, cancel := s.untilClose(r.Context())
		info, err := s.moveImage(ctx, id, *req.Image) // rollout_api.go
		cancel()
		if err != nil || req.Egress == nil {
			if err != nil {
				s.writeMoveError(w, id, err)
			} else {
				httpjson.Write(w, http.StatusOK, info)
			}
			return
		}
	}
	rules, err := s.fleet.ThreadEgress(*req.Egress)
	if err != nil {
		status, env := httpError(err)
		httpjson.Error(w, status, env.Code, env.Message)
		return
	}
	ctx, cancel := s.untilClose(r.Context())
	defer cancel()
	info, err := s.setEgress(ctx, id, rules, wire.EgressByAPI)
	switch {
	case errors.Is(err, errNoThread):
		httpjson.NotFound(w, id)
	case err != nil:
		s.log.Error("change egress rules", "thread", id, "err", err)
		httpjson.Error(w, http.StatusInternalServerError, wire.CodeInternal, err.Error())
	default:
		httpjson.Write(w, http.StatusOK, info)
	}
}

// setEgress gives thread id's sandbox the canonical rules (nil: none),
// stores them in the records of all its threads and logs an egress_rules
// event by `by` on each, and describes the thread. It holds the thread's
// life lock, so a suspended thread is not resumed with the old rules
// meanwhile, and the box's, so the records are not rewritten by a
// suspension at the same time.
func (s *Server) setEgress(ctx context.Context, id string, rules []string, by string) (wire.ThreadInfo, error) {
	unlock := s.fleet.LockThread(id)
	boxID, prev, ids, err := s.storeEgress(ctx, id, rules)
	unlock()
	if err != nil {
		return wire.ThreadInfo{}, err
	}
	s.log.Info("egress rules changed", "thread", id, "box", boxID, "rules", rules, "previous", prev, "by", by)
	ev := wire.EgressRules{Rules: rules, Previous: prev, By: by}
	if ev.Rules == nil {
		ev.Rules = []string{}
	}
	env := wire.MustNew(wire.TypeEgressRules, "", "", ev)
	for _, tid := range ids {
		if err := s.logEgressRules(ctx, tid, env); err != nil {
			s.log.Warn("egress_rules event not logged", "thread", tid, "err", err)
		}
	}
	if t := s.lookup(id); t != nil {
		return s.info(ctx, t), nil
	}
	rec, ok := s.suspendedRecord(ctx, id)
	if !ok {
		return wire.ThreadInfo{}, errNoThread // deleted meanwhile
	}
	return s.suspendedInfo(rec), nil // suspend.go
}

// storeEgress sets rules on thread id's box, when it has a live one, and
// in the records of every thread of that box (fleet.SetEgress). It returns
// the box id, the rules it had and the threads it has (live or stored).
func (s *Server) storeEgress(ctx context.Context, id string, rules []string) (boxID string, prev, ids []string, err error) {
	rec, stored, err := s.cfg.Store.Get(ctx, id)
	if err != nil {
		return "", nil, nil, fmt.Errorf("read thread %s: %w", id, err)
	}
	if t := s.lookup(id); t != nil {
		boxID = t.box.ID()
	} else if stored {
		boxID = rec.Box
	} else {
		return "", nil, nil, errNoThread
	}
	prev, ids, err = s.fleet.SetEgress(ctx, boxID, rules, rec.Egress)
	return boxID, prev, ids, err
}

// logEgressRules publishes env to thread id: to its live thread, or
// straight into the log of a suspended one (under its life lock, so it is
// not resumed meanwhile), where its next sandbox's clients find it.
func (s *Server) logEgressRules(ctx context.Context, id string, env wire.Envelope) error {
	env.Thread = id
	if t := s.lookup(id); t != nil {
		t.publish(env)
		return nil
	}
	unlock := s.fleet.LockThread(id)
	defer unlock()
	if t := s.lookup(id); t != nil {
		t.publish(env)
		return nil
	}
	if _, ok := s.suspendedRecord(ctx, id); !ok {
		return nil // removed meanwhile
	}
	s.events.Flush()
	last, err := s.events.LastSeq(id)
	if err != nil {
		return fmt.Errorf("read thread log: %w", err)
	}
	env.Seq = last + 1
	done := make(chan error, 1)
	s.events.Append(id, env, func(err error) { done <- err })
	select {
	case err = <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
