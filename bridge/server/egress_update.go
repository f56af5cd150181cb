package server

import (
	"context"
	"fmt"

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
