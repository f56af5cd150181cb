package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Reconcile adopts the live sandboxes this bridge (its BridgeID) left
// behind: it serves a new LLM proxy in each one's socket folder, greets its
// agent again and registers its thread (thread scope) or keeps it for its
// assistant's next threads (assistant scope). It removes what expired,
// stopped, cannot be reached or has no thread, with their volumes and
// folders, and removes orphaned volumes and folders. Call it once, before
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
			continue
		}
		live[sb.Labels[sandbox.LabelBox]] = true
		log.Info("adopted sandbox", "scope", sb.Labels[sandbox.LabelScope])
	}
	return s.removeStrays(ctx, live)
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
		return errors.New("expired")
	case !sb.Running:
		return errors.New("not running")
	case b.scope == wire.ScopeThread && l[sandbox.LabelThread] != b.id && !b.pooled,
		b.scope == wire.ScopeAssistant && !validName(b.assistant):
		return errors.New("labels name no thread or assistant")
	}
	b.expires = expires
	b.key = boxKey(b.scope, b.id)
	if b.scope == wire.ScopeAssistant {
		b.key = boxKey(b.scope, b.assistant)
	}
	if full, err := s.cfg.Manager.Inspect(ctx, sb.ID); err == nil {
		b.runtime = full.Runtime
	}
	dir := filepath.Join(s.cfg.DataDir, "run", b.id)
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("socket folder: %w", err)
	}
	b.res = &resources{dir: dir, sandboxID: sb.ID, volume: "boxwire-ws-" + b.id, runtime: b.runtime}
	log := s.log.With("box", b.id)
	if b.res.proxy, err = s.serveProxy(dir, log); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			b.res.proxy.Close()
		}
	}()
	if b.res.egress, err = s.serveEgress(dir, log); err != nil {
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
	}
	return err
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
		if r.Box == b.id {
			ids = append(ids, r)
		}
	}
	if b.pooled { // pool.go: adopted only when a thread took it
		if len(ids) == 0 {
			return errors.New("pooled sandbox no thread took")
		}
		b.thread = ids[0].ID
	}
	if b.scope == wire.ScopeThread && len(ids) == 0 {
		ids = append(ids, ThreadRecord{ID: b.id, Box: b.id, Scope: b.scope, Image: b.image, Runtime: b.runtime, Created: b.created})
	}
	for _, rec := range ids {
		conn, err := s.waitAgent(ctx, rec.ID, b.res)
		if err != nil {
			return fmt.Errorf("reach agent: %w", err)
		}
		if b.pooled { // pool.go: the agent keeps its token; say it again all the same
			if err := s.sendClaim(conn, b, rec.ID); err != nil {
				conn.Close()
				return err
			}
		}
		last, err := s.events.LastSeq(rec.ID)
		if err != nil {
			conn.Close()
			return fmt.Errorf("read thread log: %w", err)
		}
		t := newThread(s, rec.ID, conn, b.res, last, s.log.With("thread", rec.ID))
		if !rec.Created.IsZero() {
			t.created = rec.Created
		}
		if err := s.register(ctx, t, b, rec); err != nil {
			t.shutdown(wire.Envelope{})
			return err
		}
	}
	return nil
}

// removeOrphan removes a sandbox that was not adopted, with its volume and
// folder.
func (s *Server) removeOrphan(ctx context.Context, sb sandbox.Sandbox, log *slog.Logger) {
	res := &resources{sandboxID: sb.ID}
	if id := sb.Labels[sandbox.LabelBox]; validName(id) {
		res.volume = "boxwire-ws-" + id
		res.dir = filepath.Join(s.cfg.DataDir, "run", id)
	}
	s.removeResources(ctx, res, log)
}

// removeStrays removes this bridge's labelled volumes and socket folders
// that belong to no live sandbox.
func (s *Server) removeStrays(ctx context.Context, live map[string]bool) error {
	vols, err := s.cfg.Manager.ListVolumes(ctx, map[string]string{sandbox.LabelOwner: s.cfg.BridgeID})
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	var errs []error
	for _, v := range vols {
		if id, ok := strings.CutPrefix(v, "boxwire-ws-"); ok && (live[id] || s.poolOwns(id)) {
			continue
		}
		s.log.Info("removing stray volume", "volume", v)
		errs = append(errs, s.cfg.Manager.RemoveVolume(ctx, v))
	}
	run := filepath.Join(s.cfg.DataDir, "run")
	entries, err := os.ReadDir(run)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if !live[e.Name()] && !s.poolOwns(e.Name()) { // pool.go: being started
			errs = append(errs, os.RemoveAll(filepath.Join(run, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// Collect removes every sandbox and workspace volume labelled with
// bridgeID, and every socket folder under <dataDir>/run: what `bridge gc`
// does. Run it only when no bridge with that id is running. It returns how
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
		if err := os.RemoveAll(filepath.Join(dataDir, "run")); err != nil {
			errs = append(errs, fmt.Errorf("gc: %w", err))
		}
	}
	return sandboxes, volumes, errors.Join(errs...)
}
