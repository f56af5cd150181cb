package threadops

import (
	"context"
	"fmt"

	"github.com/boxwire/boxwire/bridge/wire"
)

// SetEgress gives thread id's sandbox the canonical rules (nil: none), as
// the API asks (wire.EgressByAPI), and describes the thread
// (docs/egress-thread.md "Changing the rules"). The rules belong to the
// sandbox (bridge/fleet), so a change applies to every thread of it: in
// assistant scope to the shared sandbox. The sandbox's egress proxy looks
// its rules up at every request, so it decides with the new ones from the
// next request on; the records of the sandbox's threads carry them, so a
// resumed, replaced or adopted sandbox keeps them. Every thread of the
// sandbox logs an egress_rules event.
//
// It holds the thread's life lock while it stores the rules, so a
// suspended thread is not resumed with the old rules meanwhile, and
// fleet.SetEgress the box's, so the records are not rewritten by a
// suspension at the same time.
func (o *Ops) SetEgress(ctx context.Context, id string, rules []string) (wire.ThreadInfo, error) {
	ctx, cancel := o.untilServer(ctx)
	defer cancel()
	by := wire.EgressByAPI
	unlock := o.cfg.Fleet.Locks().Thread(id)
	boxID, rec, err := o.boxOf(ctx, id)
	var prev, ids []string
	if err == nil {
		prev, ids, err = o.cfg.Fleet.SetEgress(ctx, boxID, rules, rec.Egress)
	}
	unlock()
	if err != nil {
		return wire.ThreadInfo{}, err
	}
	o.cfg.Log.Info("egress rules changed", "thread", id, "box", boxID, "rules", rules, "previous", prev, "by", by)
	ev := wire.EgressRules{Rules: rules, Previous: prev, By: by}
	if ev.Rules == nil {
		ev.Rules = []string{}
	}
	env := wire.MustNew(wire.TypeEgressRules, "", "", ev)
	for _, tid := range ids {
		if err := o.logEgressRules(ctx, tid, env); err != nil {
			o.cfg.Log.Warn("egress_rules event not logged", "thread", tid, "err", err)
		}
	}
	return o.describe(ctx, id)
}

// logEgressRules publishes env to thread id: to its live thread, or
// straight into the log of a suspended one (under its life lock, so it is
// not resumed meanwhile), where its next sandbox's clients find it.
func (o *Ops) logEgressRules(ctx context.Context, id string, env wire.Envelope) error {
	env.Thread = id
	if t, live := o.cfg.Threads.Lookup(id); live {
		t.Publish(env)
		return nil
	}
	unlock := o.cfg.Fleet.Locks().Thread(id)
	defer unlock()
	if t, live := o.cfg.Threads.Lookup(id); live {
		t.Publish(env)
		return nil
	}
	if _, ok := o.Suspended(ctx, id); !ok {
		return nil // removed meanwhile
	}
	ev := o.cfg.Events
	ev.Flush()
	last, err := ev.LastSeq(id)
	if err != nil {
		return fmt.Errorf("read thread log: %w", err)
	}
	env.Seq = last + 1
	done := make(chan error, 1)
	ev.Append(id, env, func(err error) { done <- err })
	select {
	case err = <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// MoveImage moves thread id's sandbox to the allowed image (the whole
// shared sandbox in assistant scope), keeping workspace and conversation
// (fleet.Images.Move): a live idle one is replaced at once (sandbox_exited
// and sandbox_replaced, reason image_update), a busy one once its work
// ended, a suspended thread resumes on the new image. It describes the
// thread. The rollout routes themselves are bridge/rollout's.
func (o *Ops) MoveImage(ctx context.Context, id, image string) (wire.ThreadInfo, error) {
	ctx, cancel := o.untilServer(ctx)
	defer cancel()
	boxID, _, err := o.boxOf(ctx, id)
	if err != nil {
		return wire.ThreadInfo{}, err
	}
	prev, ids, err := o.cfg.Fleet.Images().Move(ctx, boxID, image)
	if err != nil {
		return wire.ThreadInfo{}, err
	}
	o.cfg.Log.Info("thread image changed", "thread", id, "box", boxID, "image", image, "previous", prev, "threads", ids)
	return o.describe(ctx, id)
}
