package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/boxwire/boxwire/bridge/fleet/find"
	"log/slog"
	"time"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/fleet/collect"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Reconcile adopts the live sandboxes this bridge (its BridgeID) left
// behind: it serves a new LLM proxy in each one's socket folder, greets its
// agent again and has Config.Adopt take its threads back (thread scope:
// the one its labels name; and those the records know) or keeps it for its
// assistant's next threads (assistant scope); one whose thread another
// bridge relays now is left to it (Config.Claim). It removes what expired,
// stopped, cannot be reached or has no thread, with their folders; a stored
// thread left without a sandbox is suspended (suspend.go) and keeps its
// workspace volume; other volumes and folders of no live sandbox go. Last
// it replaces sandboxes whose image was updated (imageupdate.go). Call it once, before
// serving. It blocks until done or ctx ends; it fails only when the engine
// cannot list sandboxes.
func (f *Fleet) Reconcile(ctx context.Context) error { return f.rec.run(ctx) }

// run is Reconcile.
func (rc *reconciler) run(ctx context.Context) error {
	list, err := rc.f.cfg.Manager.List(ctx, map[string]string{sandbox.LabelOwner: rc.f.cfg.BridgeID})
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	live := map[string]bool{}
	now := time.Now()
	for _, sb := range list {
		log := rc.f.log.With("sandbox", sb.ID, "box", sb.Labels[sandbox.LabelBox])
		if rc.f.pool.Owns(sb.Labels[sandbox.LabelBox]) { // pool.go: this run's warm pool
			live[sb.Labels[sandbox.LabelBox]] = true
			continue
		}
		if _, err := rc.adopt(ctx, sb, now, rc.f.cfg.Layout, true); errors.Is(err, ErrRelayedElsewhere) {
			live[sb.Labels[sandbox.LabelBox]] = true // handover.go: a peer took it over; its volume and folders stay
			log.Info("sandbox relayed by another bridge: left to it", "why", err)
			continue
		} else if err != nil {
			log.Info("removing sandbox of an earlier run", "why", err)
			rc.removeOrphan(ctx, sb, log)
			rc.suspendBoxThreads(ctx, sb, err, log)
			continue
		}
		live[sb.Labels[sandbox.LabelBox]] = true
		log.Info("adopted sandbox", "scope", sb.Labels[sandbox.LabelScope])
	}
	kept := rc.suspendLeftovers(ctx)
	// A volume stays for a live, stored or pooled sandbox, a socket folder
	// for a live or pooled one (pool.go: being started).
	f := rc.f
	err = collect.Strays(ctx, f.cfg.Manager, f.cfg.BridgeID, f.cfg.Layout,
		func(id string) bool { return live[id] || kept[id] || f.pool.Owns(id) },
		func(id string) bool { return live[id] || f.pool.Owns(id) }, f.log)
	rc.f.reaper.checkImages(ctx) // imageupdate.go
	return err
}

// reconciler is Reconcile's work: adopting, removing and suspending what
// an earlier run left, on its fleet's boxes.
type reconciler struct{ f *Fleet }

// adopt takes over one listed sandbox, or says why it will not, and
// returns its box. Its folders are lay's (another bridge's, for TakeOver).
// With threads, Config.Adopt takes back its threads (those the records
// know, or the one its labels name); without (TakeOverShared), it joins
// none and starts as a join (Box.joining: the caller calls Started).
func (rc *reconciler) adopt(ctx context.Context, sb sandbox.Sandbox, now time.Time, lay *boxdir.Layout, threads bool) (_ *Box, err error) {
	b, err := rc.boxOf(sb, now)
	if err != nil {
		return nil, err
	}
	if b.pooled { // pool_adopt.go: only one a thread took, under that thread's key and TTL
		if err := (poolHost{rc.f}).adopt(ctx, b); err != nil {
			return nil, err
		}
	}
	if err := rc.claim(ctx, b); err != nil { // before its sockets are touched
		return nil, err
	}
	if full, err := rc.f.cfg.Manager.Inspect(ctx, sb.ID); err == nil {
		b.runtime = full.Runtime
	}
	// A sandbox of an older bridge, whose one folder it could write, is
	// not adopted but replaced (its thread is suspended and resumes in a
	// new sandbox with its workspace): boxdir.Layout.Open says why.
	dirs, err := lay.Open(b.id)
	if err != nil {
		return nil, fmt.Errorf("sandbox folders: %w", err)
	}
	b.res = &resources{dirs: dirs, sandboxID: sb.ID, volume: "boxwire-ws-" + b.id, runtime: b.runtime}
	log := rc.f.log.With("box", b.id)
	if b.res.proxy, err = rc.f.px.ServeLLM(dirs, log); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			b.res.proxy.Close()
		}
	}()
	if b.res.egress, err = rc.f.px.ServeEgress(dirs, log); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && b.res.egress != nil {
			b.res.egress.Close()
		}
	}()
	if !threads {
		b.joining = 1
	}
	if err := rc.enter(b); err != nil {
		return nil, err
	}
	if err = rc.adoptThreads(ctx, b, threads); err != nil {
		rc.f.mu.Lock()
		delete(rc.f.boxes, b.key)
		b.gone = true
		rc.f.mu.Unlock()
		return nil, err
	}
	rc.f.rep.recordImage(ctx, b) // lifecycle.go
	return b, nil
}

// boxOf reads the box of a listed sandbox from its labels, or says why
// it cannot be adopted.
func (rc *reconciler) boxOf(sb sandbox.Sandbox, now time.Time) (*Box, error) {
	l := sb.Labels
	b := &Box{
		id: l[sandbox.LabelBox], scope: wire.Scope(l[sandbox.LabelScope]), assistant: l[sandbox.LabelAssistant],
		image: sb.Image, ready: make(chan struct{}), members: map[string]Member{}, lastUsed: now,
		idleTTL: parseIdleTTL(l[labelIdleTTL], rc.f.cfg.IdleTTL), pooled: l[find.LabelPool] == "1",
		foreign: l[sandbox.LabelOwner] != rc.f.cfg.BridgeID, px: rc.f.px,
	}
	close(b.ready)
	b.created, _ = time.Parse(time.RFC3339, l[sandbox.LabelCreated])
	expires, perr := time.Parse(time.RFC3339, l[sandbox.LabelExpires])
	switch {
	case !validName(b.id):
		return nil, errors.New("no box label")
	case perr != nil || !now.Before(expires):
		return nil, errExpired
	case !sb.Running:
		return nil, errors.New("not running")
	case b.scope == wire.ScopeThread && !validName(l[sandbox.LabelThread]) && !b.pooled,
		b.scope == wire.ScopeAssistant && !validName(b.assistant):
		return nil, errors.New("labels name no thread or assistant")
	}
	b.expires = expires
	if th := l[sandbox.LabelThread]; b.scope == wire.ScopeThread && !b.pooled && th != b.id {
		b.thread = th // a resumed thread in the box of its pooled sandbox (suspend.go)
	}
	b.key = boxKey(b.scope, cmp.Or(b.thread, b.id))
	switch {
	case b.scope == wire.ScopeAssistant && b.foreign:
		b.key = boxKey("box", b.id) // handover.go: no new thread joins a shared sandbox another bridge made
	case b.scope == wire.ScopeAssistant:
		b.key = boxKey(b.scope, b.assistant)
	}
	return b, nil
}

// claim takes the leases of b's threads before b is adopted (handover.go):
// its thread's (Config.Claim), or every live one of a shared sandbox
// (Config.ClaimShared).
func (rc *reconciler) claim(ctx context.Context, b *Box) error {
	switch cfg := rc.f.cfg; {
	case b.scope == wire.ScopeThread && cfg.Claim != nil:
		return cfg.Claim(ctx, cmp.Or(b.thread, b.id))
	case b.scope == wire.ScopeAssistant && cfg.ClaimShared != nil:
		return cfg.ClaimShared(ctx, b.id)
	}
	return nil
}

// enter adds b, adopted, to the fleet's boxes. A shared box whose
// assistant has a box here already (one this bridge made since, say) is
// kept under its box id.
func (rc *reconciler) enter(b *Box) error {
	f := rc.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.boxes[b.key]; dup && b.scope == wire.ScopeAssistant {
		b.key = boxKey("box", b.id)
	}
	if _, dup := f.boxes[b.key]; dup || f.closed {
		return errors.New("duplicate sandbox or bridge closing")
	}
	f.boxes[b.key] = b
	return nil
}

// adoptThreads reconnects b's threads when threads is set: the one its
// labels name (thread scope) and those the store knows. Either way b
// takes the egress rules they asked for.
func (rc *reconciler) adoptThreads(ctx context.Context, b *Box, threads bool) error {
	ids, err := rc.f.book.Running(ctx, b.id) // suspended ones wait for their client (suspend.go)
	if err != nil {
		return err
	}
	rc.f.rules.adopt(b, ids, rc.f.log.With("box", b.id)) // egress.go: the rules its threads asked for
	if !threads {
		return nil
	}
	if b.scope == wire.ScopeThread && len(ids) == 0 {
		ids = append(ids, ThreadRecord{ID: cmp.Or(b.thread, b.id), Box: b.id, Scope: b.scope, Image: b.image, Runtime: b.runtime, Created: b.created})
	}
	if rc.f.cfg.Adopt == nil {
		return errors.New("nothing takes threads back (Config.Adopt)")
	}
	for _, rec := range ids {
		if err := rc.f.cfg.Adopt(ctx, b, rec); err != nil {
			return err
		}
	}
	return nil
}

// removeOrphan removes a sandbox that was not adopted, with its folder,
// and its volume unless a stored thread owns it (it is then suspended).
func (rc *reconciler) removeOrphan(ctx context.Context, sb sandbox.Sandbox, log *slog.Logger) {
	res := &resources{sandboxID: sb.ID}
	if id := sb.Labels[sandbox.LabelBox]; validName(id) {
		res.volume = "boxwire-ws-" + id
		res.dirs = rc.f.cfg.Layout.Paths(id)
		if len(rc.f.book.OfBox(ctx, id)) > 0 {
			res.volume = ""
		}
	}
	rc.f.removeResources(ctx, res, log)
}

// errExpired: a sandbox of an earlier run is past its maximum lifetime.
var errExpired = errors.New("expired")

// suspendBoxThreads marks the threads of a sandbox that was not adopted
// suspended: why "expired" is the maximum lifetime, anything else a
// sandbox that died while the bridge was away.
func (rc *reconciler) suspendBoxThreads(ctx context.Context, sb sandbox.Sandbox, why error, log *slog.Logger) {
	reason := wire.ExitDied
	if errors.Is(why, errExpired) {
		reason = wire.ExitLifetime
	}
	now := time.Now().UTC().Truncate(time.Second)
	for _, r := range rc.f.book.OfBox(ctx, sb.Labels[sandbox.LabelBox]) {
		if rc.f.isMember(r.ID) || r.Suspended != nil {
			continue
		}
		if err := rc.f.book.MarkSuspended(ctx, r.ID, nil, now, reason); err != nil {
			log.Error("suspend thread", "thread", r.ID, "err", err)
		}
	}
}

// suspendLeftovers marks suspended the stored threads that have no
// sandbox after adoption (none was left running) and returns the box ids
// whose workspace volumes the suspended threads keep.
func (rc *reconciler) suspendLeftovers(ctx context.Context) map[string]bool {
	recs, err := rc.f.cfg.Records.List(ctx)
	if err != nil {
		rc.f.log.Error("list stored threads", "err", err)
	}
	kept := map[string]bool{}
	now := time.Now().UTC().Truncate(time.Second)
	for _, r := range recs {
		if rc.f.isMember(r.ID) {
			continue
		}
		if kept[r.Box] = true; r.Suspended != nil {
			continue
		}
		if !rc.f.find.Runs(ctx, r) { // a running one is a peer's: TakeOver's (handover.go)
			rc.f.log.Info("thread has no sandbox: suspended", "thread", r.ID, "box", r.Box)
			if err := rc.f.book.MarkSuspended(ctx, r.ID, nil, now, wire.ExitDied); err != nil {
				rc.f.log.Error("suspend thread", "thread", r.ID, "err", err)
			}
		}
	}
	return kept
}
