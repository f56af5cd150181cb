package fleet

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// suspend ends b's sandbox but keeps its members' threads: their records
// are marked suspended, then each member is told (Member.Suspend: it logs
// ev, sandbox_exited idle, and closes its clients with it); then the
// sandbox, its proxies and folders go, and the workspace volume stays for
// the resumption (Acquire with ResumeOptions) or the thread retention
// (retire). It blocks for the engine.
func (rp *reaper) suspend(ctx context.Context, b *Box, ev wire.SandboxExited) error {
	f := rp.f
	unlock := f.life.Box(b.id)
	defer unlock()
	f.mu.Lock()
	ids := make([]string, 0, len(b.members))
	for id := range b.members {
		ids = append(ids, id)
	}
	gone := b.gone
	f.mu.Unlock()
	if gone {
		return nil
	}
	// Records first: the threads API sees each thread live or suspended,
	// never missing.
	var errs []error
	now := time.Now().UTC().Truncate(time.Second)
	for _, id := range ids {
		errs = append(errs, f.book.MarkSuspended(ctx, id, b.record(id, now), now, ev.Reason))
	}
	f.mu.Lock()
	if b.gone {
		f.mu.Unlock()
		return nil
	}
	b.gone = true
	if f.boxes[b.key] == b {
		delete(f.boxes, b.key)
	}
	members := make([]Member, 0, len(b.members))
	for _, m := range b.members {
		members = append(members, m)
	}
	f.mu.Unlock()
	f.log.Info("sandbox suspended", "box", b.id, "reason", ev.Reason, "threads", len(members))
	for _, m := range members {
		m.Suspend(ev)
		if !slices.Contains(ids, m.ID()) { // joined meanwhile
			errs = append(errs, f.book.MarkSuspended(ctx, m.ID(), b.record(m.ID(), now), now, ev.Reason))
		}
	}
	// The sandbox id is read after the members stopped: a replacement they
	// ran is over.
	res := b.res.keepingVolume()
	errs = append(errs, res.remove(ctx, f.cfg.Manager))
	f.pool.Wake() // there may be room for a pooled sandbox again
	return errors.Join(errs...)
}

// record is the record of b's member id, created at `at`, for a member
// the records do not know yet.
func (b *Box) record(id string, at time.Time) *ThreadRecord {
	return &ThreadRecord{ID: id, Box: b.id, Scope: b.scope, Assistant: b.assistant, Image: b.Image(),
		Runtime: b.runtime, Created: at}
}

// SuspendedRecord returns id's record when the thread is suspended (a
// member of no box, marked in the records).
func (f *Fleet) SuspendedRecord(ctx context.Context, id string) (ThreadRecord, bool) {
	if f.isMember(id) {
		return ThreadRecord{}, false
	}
	return f.book.Suspended(ctx, id)
}

// retire removes the threads suspended for ThreadTTL or longer, with
// their logs and workspace volumes.
func (rp *reaper) retire(ctx context.Context, now time.Time) {
	f := rp.f
	recs, err := f.book.Expired(ctx, now, f.cfg.ThreadTTL)
	if err != nil {
		f.log.Error("thread retention", "err", err)
		return
	}
	for _, r := range recs {
		if err := f.RemoveSuspended(ctx, r.ID); err != nil {
			f.log.Error("remove suspended thread", "thread", r.ID, "err", err)
			continue
		}
		f.log.Info("suspended thread removed", "thread", r.ID, "suspended", r.Suspended, "thread_ttl", f.cfg.ThreadTTL)
	}
}

// RemoveSuspended deletes a suspended thread's record (and with it, in the
// bridge's records, its log), and its workspace volume when no other
// thread or sandbox uses it. A thread resumed meanwhile is left alone.
func (f *Fleet) RemoveSuspended(ctx context.Context, id string) error {
	unlock := f.life.Thread(id)
	defer unlock()
	rec, ok := f.SuspendedRecord(ctx, id)
	if !ok {
		return nil
	}
	if err := f.cfg.Records.Delete(ctx, id); err != nil {
		return err
	}
	return f.DropVolumeIfUnused(ctx, rec.Box)
}

// DropVolumeIfUnused removes box id's workspace volume unless a live
// sandbox or a stored thread still uses it.
func (f *Fleet) DropVolumeIfUnused(ctx context.Context, id string) error {
	unlock := f.life.Box(id)
	defer unlock()
	f.mu.Lock()
	for _, b := range f.boxes {
		select {
		case <-b.ready: // b.id is set
		default:
			continue
		}
		if b.id == id {
			f.mu.Unlock()
			return nil
		}
	}
	f.mu.Unlock()
	if used, err := f.book.UsesBox(ctx, id); err != nil || used {
		return err
	}
	return f.cfg.Manager.RemoveVolume(ctx, "boxwire-ws-"+id)
}
