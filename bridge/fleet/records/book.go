package records

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Book asks and updates the thread records of Store for the fleet; Log
// receives what it cannot report (a failed list where the caller goes on
// with none). Both are required.
type Book struct {
	Store Store
	Log   *slog.Logger
}

// OfBox returns the stored threads whose sandbox is box id (none, logged,
// when the store cannot list them).
func (k Book) OfBox(ctx context.Context, id string) []Thread {
	recs, err := k.Store.List(ctx)
	if err != nil {
		k.Log.Error("list stored threads", "err", err)
	}
	var out []Thread
	for _, r := range recs {
		if r.Box == id {
			out = append(out, r)
		}
	}
	return out
}

// Running returns the stored threads of box id that are not suspended
// (those wait for their client to resume them).
func (k Book) Running(ctx context.Context, id string) ([]Thread, error) {
	recs, err := k.Store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list stored threads: %w", err)
	}
	var out []Thread
	for _, r := range recs {
		if r.Box == id && r.Suspended == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// Taken returns the thread-scope thread whose box is id, the thread that
// took a pooled sandbox; ok is false when none did.
func (k Book) Taken(ctx context.Context, id string) (rec Thread, ok bool, err error) {
	recs, err := k.Store.List(ctx)
	if err != nil {
		return Thread{}, false, fmt.Errorf("list stored threads: %w", err)
	}
	for _, r := range recs {
		if r.Box == id && r.Scope == wire.ScopeThread {
			return r, true, nil
		}
	}
	return Thread{}, false, nil
}

// UsesBox reports whether a stored thread names box id.
func (k Book) UsesBox(ctx context.Context, id string) (bool, error) {
	recs, err := k.Store.List(ctx)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(recs, func(r Thread) bool { return r.Box == id }), nil
}

// MarkSuspended records thread id as suspended at `at` for reason; fill,
// when set, is the record to write when none is stored (nil: then
// nothing is written).
func (k Book) MarkSuspended(ctx context.Context, id string, fill *Thread, at time.Time, reason wire.ExitReason) error {
	rec, ok, err := k.Store.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("suspend thread %s: %w", id, err)
	}
	if !ok {
		if fill == nil {
			return nil
		}
		rec = *fill
	}
	rec.Suspended, rec.SuspendedFor = &at, reason
	if err := k.Store.Put(ctx, rec); err != nil {
		return fmt.Errorf("suspend thread %s: %w", id, err)
	}
	return nil
}

// Suspended returns id's record when it is marked suspended. The caller
// knows the thread is a member of no box.
func (k Book) Suspended(ctx context.Context, id string) (Thread, bool) {
	rec, ok, err := k.Store.Get(ctx, id)
	if err != nil || !ok || rec.Suspended == nil {
		return Thread{}, false
	}
	return rec, true
}

// NewestSuspended is the box id of the newest suspended thread of
// assistant whose box has no live thread, so that its next sandbox takes
// the assistant's workspace back; "" when there is none or the store
// cannot list them. A box with a live thread is not suspended: a bridge
// relays it, or takes it over, in its running sandbox.
func (k Book) NewestSuspended(ctx context.Context, assistant string) string {
	recs, err := k.Store.List(ctx)
	if err != nil {
		return ""
	}
	live := map[string]bool{}
	for _, r := range recs {
		if r.Suspended == nil {
			live[r.Box] = true
		}
	}
	var id string
	var newest time.Time
	for _, r := range recs {
		if r.Scope == wire.ScopeAssistant && r.Assistant == assistant && r.Suspended != nil && !live[r.Box] && !r.Suspended.Before(newest) {
			id, newest = r.Box, *r.Suspended
		}
	}
	return id
}

// Expired returns the threads suspended for ttl or longer at now.
func (k Book) Expired(ctx context.Context, now time.Time, ttl time.Duration) ([]Thread, error) {
	recs, err := k.Store.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []Thread
	for _, r := range recs {
		if r.Suspended != nil && now.Sub(*r.Suspended) >= ttl {
			out = append(out, r)
		}
	}
	return out, nil
}

// SetImage names image in the records of every thread of box id and adds
// their ids to ids (sorted, once each); prev, when empty, becomes the
// image the first record named.
func (k Book) SetImage(ctx context.Context, id, image string, ids []string, prev string) ([]string, string, error) {
	for _, r := range k.OfBox(ctx, id) {
		prev = cmp.Or(prev, r.Image)
		r.Image = image
		if err := k.Store.Put(ctx, r); err != nil {
			return nil, prev, fmt.Errorf("store thread %s: %w", r.ID, err)
		}
		if !slices.Contains(ids, r.ID) {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	return ids, prev, nil
}

// SetEgress gives every stored thread of box id the egress rules and adds
// their ids to ids (sorted, once each).
func (k Book) SetEgress(ctx context.Context, id string, rules, ids []string) ([]string, error) {
	recs, err := k.Store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list stored threads: %w", err)
	}
	for _, r := range recs {
		if r.Box != id {
			continue
		}
		r.Egress = rules
		if err := k.Store.Put(ctx, r); err != nil {
			return nil, fmt.Errorf("store thread %s: %w", r.ID, err)
		}
		if !slices.Contains(ids, r.ID) {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	return ids, nil
}
