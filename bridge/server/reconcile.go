package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Reconcile adopts the live sandboxes this bridge (its BridgeID) left
// behind: it serves a new LLM proxy in each one's socket folder, greets its
// agent again and registers its thread (thread scope) or keeps it for its
// assistant's next threads (assistant scope). It removes what expired,
// stopped, cannot be reached or has no thread, with their folders; a stored
// thread left without a sandbox is suspended (suspend.go) and keeps its
// workspace volume; other volumes and folders of no live sandbox go. Last
// it replaces sandboxes whose image was updated (imageupdate.go). Call it once, before
// serving. It blocks until done or ctx ends; it fails only when the engine
// cannot list sandboxes.
func (s *Server) Reconcile(ctx context.Context) error {
	list, err := s.cfg.Manager.List(ctx, map[string]string{sandbox.LabelOwner: s.cfg.BridgeID})
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	live := map[string]bool{}
	now := time.Now()
	for _, sb := range list {
		log := s.log.With("sandbox", sb.ID, "box", sb.Labels[sandbox.LabelBox])
		if s.poolOwns(sb.Labels[sandbox.LabelBox]) { // pool.go: this run's warm pool
			live[sb.Labels[sandbox.LabelBox]] = true
			continue
		}
		if err := s.adopt(ctx, sb, now); err != nil {
			log.Info("removing sandbox of an earlier run", "why", err)
			s.removeOrphan(ctx, sb, log)
			s.suspendBoxThreads(ctx, sb, err, log)
			continue
		}
		live[sb.Labels[sandbox.LabelBox]] = true
		log.Info("adopted sandbox", "scope", sb.Labels[sandbox.LabelScope])
	}
	kept := s.suspendLeftovers(ctx)
	err = s.removeStrays(ctx, live, kept)
	s.checkImages(ctx) // imageupdate.go
	return err
}

// adopt takes over one listed sandbox, or says why it will not.
func (s *Server) adopt(ctx context.Context, sb sandbox.Sandbox, now time.Time) (err error) {
	l := sb.Labels
	b := &box{
		id: l[sandbox.LabelBox], scope: wire.Scope(l[sandbox.LabelScope]), assistant: l[sandbox.LabelAssistant],
		image: sb.Image, ready: make(chan struct{}), threads: map[string]*thread{}, lastUsed: now,
		idleTTL: parseIdleTTL(l[labelIdleTTL], s.cfg.IdleTTL), pooled: l[labelPool] == "1",
	}
	close(b.ready)
	b.created, _ = time.Parse(time.RFC3339, l[sandbox.LabelCreated])
	expires, perr := time.Parse(time.RFC3339, l[sandbox.LabelExpires])
	switch {
	case !validName(b.id):
		return errors.New("no box label")
	case perr != nil || !now.Before(expires):
		return errExpired
	case !sb.Running:
		return errors.New("not running")
	case b.scope == wire.ScopeThread && !validName(l[sandbox.LabelThread]) && !b.pooled,
		b.scope == wire.ScopeAssistant && !validName(b.assistant):
		return errors.New("labels name no thread or assistant")
	}
	b.expires = expires
	if th := l[sandbox.LabelThread]; b.scope == wire.ScopeThread && !b.pooled && th != b.id {
		b.thread = th // a resumed thread in the box of its pooled sandbox (suspend.go)
	}
	b.key = boxKey(b.scope, cmp.Or(b.thread, b.id))
	if b.scope == wire.ScopeAssistant {
		b.key = boxKey(b.scope, b.assistant)
	}
	if b.pooled { // pool_adopt.go: only one a thread took, under that thread's key and TTL
		if err := s.adoptPooled(ctx, b); err != nil {
			return err
		}
	}
	if full, err := s.cfg.Manager.Inspect(ctx, sb.ID); err == nil {
		b.runtime = full.Runtime
	}
	// A sandbox of an older bridge, whose one folder it could write, is
	// not adopted but replaced (its thread is suspended and resumes in a
	// new sandbox with its workspace): boxdir.Layout.Open says why.
	dirs, err := s.dirs.Open(b.id)
	if err != nil {
		return fmt.Errorf("sandbox folders: %w", err)
	}
	b.res = &resources{dirs: dirs, sandboxID: sb.ID, volume: "boxwire-ws-" + b.id, runtime: b.runtime}
	log := s.log.With("box", b.id)
	if b.res.proxy, err = s.serveProxy(dirs, log); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			b.res.proxy.Close()
		}
	}()
	if b.res.egress, err = s.serveEgress(dirs, log); err != nil {
		return err
	}
	defer func() {
		if err != nil && b.res.egress != nil {
			b.res.egress.Close()
		}
	}()
	s.mu.Lock()
	if _, dup := s.boxes[b.key]; dup || s.closed {
		s.mu.Unlock()
		return errors.New("duplicate sandbox or bridge closing")
	}
	s.boxes[b.key] = b
	s.mu.Unlock()
	if err = s.adoptThreads(ctx, b); err != nil {
		s.mu.Lock()
		delete(s.boxes, b.key)
		b.gone = true
		s.mu.Unlock()
		return err
	}
	s.recordImage(ctx, b) // lifecycle.go
	return nil
}

// adoptThreads reconnects b's threads: the one its labels name (thread
// scope) and those the store knows.
func (s *Server) adoptThreads(ctx context.Context, b *box) error {
	recs, err := s.cfg.Store.List(ctx)
	if err != nil {
		return fmt.Errorf("list stored threads: %w", err)
	}
	var ids []ThreadRecord
	for _, r := range recs {
		if r.Box == b.id && r.Suspended == nil { // suspended ones wait for their client (suspend.go)
			ids = append(ids, r)
		}
	}
	s.adoptEgress(b, ids, s.log.With("box", b.id)) // egress_thread.go: the rules its threads asked for
	if b.scope == wire.ScopeThread && len(ids) == 0 {
		ids = append(ids, ThreadRecord{ID: cmp.Or(b.thread, b.id), Box: b.id, Scope: b.scope, Image: b.image, Runtime: b.runtime, Created: b.created})
	}
	for _, rec := range ids {
		conn, err := s.waitAgent(ctx, rec.ID, b.res)
		if err != nil {
			return fmt.Errorf("reach agent: %w", err)
		}
		last, err := s.events.LastSeq(rec.ID)
		if err != nil {
			conn.Close()
			return fmt.Errorf("read thread log: %w", err)
		}
		t := newThread(s, rec.ID, conn, b.res, last, s.log.With("thread", rec.ID))
		t.gate.set(s.storedPolicy(rec)) // approvals_egress.go
		if !rec.Created.IsZero() {
			t.created = rec.Created
		}
		s.setLinked(b, rec.ID, b.res.sandbox()) // lifecycle.go
		if err := s.register(ctx, t, b, rec); err != nil {
			t.shutdown(wire.Envelope{})
			return err
		}
	}
	return nil
}

// removeOrphan removes a sandbox that was not adopted, with its folder,
// and its volume unless a stored thread owns it (it is then suspended).
func (s *Server) removeOrphan(ctx context.Context, sb sandbox.Sandbox, log *slog.Logger) {
	res := &resources{sandboxID: sb.ID}
	if id := sb.Labels[sandbox.LabelBox]; validName(id) {
		res.volume = "boxwire-ws-" + id
		res.dirs = s.dirs.Paths(id)
		if len(s.recordsOfBox(ctx, id)) > 0 {
			res.volume = ""
		}
	}
	s.removeResources(ctx, res, log)
}

// removeStrays removes this bridge's labelled volumes and socket folders
// that belong to no live sandbox.
func (s *Server) removeStrays(ctx context.Context, live, kept map[string]bool) error {
	vols, err := s.cfg.Manager.ListVolumes(ctx, map[string]string{sandbox.LabelOwner: s.cfg.BridgeID})
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	var errs []error
	for _, v := range vols {
		if id, ok := strings.CutPrefix(v, "boxwire-ws-"); ok && (live[id] || kept[id] || s.poolOwns(id)) {
			continue
		}
		s.log.Info("removing stray volume", "volume", v)
		errs = append(errs, s.cfg.Manager.RemoveVolume(ctx, v))
	}
	ids, err := s.dirs.IDs()
	if err != nil {
		errs = append(errs, err)
	}
	for _, id := range ids {
		if !live[id] && !s.poolOwns(id) { // pool.go: being started
			errs = append(errs, s.dirs.Remove(id))
		}
	}
	return errors.Join(errs...)
}

// Collect removes every sandbox and workspace volume labelled with
// bridgeID, every socket folder under <dataDir>/run and every thread (and
// its log) in <dataDir>/boxwire.db, suspended ones included: what `bridge
// gc` does. Run it only when no bridge with that id is running (the store
// file is locked while one runs). It returns how
// many sandboxes and volumes it removed.
func Collect(ctx context.Context, mgr sandbox.Manager, bridgeID, dataDir string) (sandboxes, volumes int, err error) {
	owner := map[string]string{sandbox.LabelOwner: bridgeID}
	list, err := mgr.List(ctx, owner)
	if err != nil {
		return 0, 0, fmt.Errorf("gc: %w", err)
	}
	var errs []error
	for _, sb := range list {
		if err := mgr.Remove(ctx, sb.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		sandboxes++
	}
	vols, err := mgr.ListVolumes(ctx, owner)
	if err != nil {
		return sandboxes, 0, errors.Join(append(errs, fmt.Errorf("gc: %w", err))...)
	}
	for _, v := range vols {
		if err := mgr.RemoveVolume(ctx, v); err != nil {
			errs = append(errs, err)
			continue
		}
		volumes++
	}
	if dataDir != "" {
		if err := boxdir.RemoveAll(dataDir); err != nil {
			errs = append(errs, fmt.Errorf("gc: %w", err))
		}
		errs = append(errs, forgetThreads(filepath.Join(dataDir, StoreFile)))
	}
	return sandboxes, volumes, errors.Join(errs...)
}

// forgetThreads deletes every thread and its log from the store file at
// path, if there is one: with their sandboxes and volumes gone, suspended
// threads (and the rest) have nothing left to resume.
func forgetThreads(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	st, err := store.Open(path, store.Options{})
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	ts, err := st.Threads()
	errs := []error{err}
	for _, t := range ts {
		errs = append(errs, st.DeleteThread(t.ID))
	}
	errs = append(errs, st.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gc: forget threads: %w", err)
	}
	return nil
}

// errExpired: a sandbox of an earlier run is past its maximum lifetime.
var errExpired = errors.New("expired")

// recordsOfBox returns the stored threads whose sandbox is box id.
func (s *Server) recordsOfBox(ctx context.Context, id string) []ThreadRecord {
	recs, err := s.cfg.Store.List(ctx)
	if err != nil {
		s.log.Error("list stored threads", "err", err)
	}
	var out []ThreadRecord
	for _, r := range recs {
		if r.Box == id {
			out = append(out, r)
		}
	}
	return out
}

// suspendBoxThreads marks the threads of a sandbox that was not adopted
// suspended: why "expired" is the maximum lifetime, anything else a
// sandbox that died while the bridge was away.
func (s *Server) suspendBoxThreads(ctx context.Context, sb sandbox.Sandbox, why error, log *slog.Logger) {
	reason := wire.ExitDied
	if errors.Is(why, errExpired) {
		reason = wire.ExitLifetime
	}
	now := time.Now().UTC().Truncate(time.Second)
	for _, r := range s.recordsOfBox(ctx, sb.Labels[sandbox.LabelBox]) {
		if s.lookup(r.ID) != nil || r.Suspended != nil {
			continue
		}
		if err := s.markSuspended(ctx, r.ID, nil, now, reason); err != nil {
			log.Error("suspend thread", "thread", r.ID, "err", err)
		}
	}
}

// suspendLeftovers marks suspended the stored threads that have no
// sandbox after adoption (none was left running) and returns the box ids
// whose workspace volumes the suspended threads keep.
func (s *Server) suspendLeftovers(ctx context.Context) map[string]bool {
	recs, err := s.cfg.Store.List(ctx)
	if err != nil {
		s.log.Error("list stored threads", "err", err)
	}
	kept := map[string]bool{}
	now := time.Now().UTC().Truncate(time.Second)
	for _, r := range recs {
		if s.lookup(r.ID) != nil {
			continue
		}
		kept[r.Box] = true
		if r.Suspended == nil {
			s.log.Info("thread has no sandbox: suspended", "thread", r.ID, "box", r.Box)
			if err := s.markSuspended(ctx, r.ID, nil, now, wire.ExitDied); err != nil {
				s.log.Error("suspend thread", "thread", r.ID, "err", err)
			}
		}
	}
	return kept
}
