package threadops

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/threadapi"
	"github.com/boxwire/boxwire/bridge/users"
	"github.com/boxwire/boxwire/bridge/wire"
)

// ErrNoThread is a call's error for a thread that does not exist (or no
// longer does): bridge/threadapi's, which answers it 404.
var ErrNoThread = threadapi.ErrNoThread

// inspectWait bounds asking the engine whether a thread's sandbox runs.
const inspectWait = 3 * time.Second

// Thread is a live thread of the server.
type Thread interface {
	ID() string
	// Box is the sandbox the thread runs in; Created is when the thread
	// was made; Clients is how many clients are attached.
	Box() *fleet.Box
	Created() time.Time
	Clients() int
	// Publish adds a bridge event to the thread's log (redacted,
	// numbered, stored, sent).
	Publish(env wire.Envelope)
}

// Threads are the server's live threads.
type Threads interface {
	// Lookup returns live thread id, false when there is none.
	Lookup(id string) (Thread, bool)
	// Live returns every live thread, in any order.
	Live() []Thread
}

// Owners names the owners of threads (*users.Users).
type Owners interface {
	// OwnerOf is the owner of thread id, "" when there is no such thread.
	OwnerOf(ctx context.Context, id string) string
	// Filter keeps the threads the caller of ctx may see, of owner ("" any).
	Filter(ctx context.Context, infos []wire.ThreadInfo, owner string) []wire.ThreadInfo
}

// Events is the event log of the threads (every store.Backend is one).
type Events interface {
	// Append queues env for the thread's log and calls done once it is
	// committed or failed.
	Append(thread string, env wire.Envelope, done func(error))
	// LastSeq is the seq of the thread's newest stored event.
	LastSeq(thread string) (uint64, error)
	// Flush waits until every queued append is committed; Events then
	// returns up to limit stored events with seq > after.
	Flush()
	Events(thread string, after uint64, limit int) ([]wire.Envelope, error)
}

// Config is what an Ops works over; every field is required.
type Config struct {
	Threads Threads
	Fleet   *fleet.Fleet
	Records fleet.Records
	Events  Events
	Manager sandbox.Manager // asked whether a live thread's sandbox runs
	Owners  Owners
	// ThreadTTL is how long after its suspension a suspended thread is
	// removed (its Expires).
	ThreadTTL time.Duration
	// Elsewhere, when set, returns the threads other bridges on a shared
	// store relay, each with the bridge's id; List describes them from
	// their records (Relay set).
	Elsewhere func(ctx context.Context) map[string]string
	Log       *slog.Logger
	// Server ends when the server closes: it also ends SetEgress and
	// MoveImage.
	Server context.Context
}

// Ops describes and changes threads; see the package doc.
type Ops struct{ cfg Config }

// New returns the Ops over cfg.
func New(cfg Config) *Ops { return &Ops{cfg: cfg} }

// Info describes live thread t, asking the engine (at most inspectWait)
// whether its sandbox runs.
func (o *Ops) Info(ctx context.Context, t Thread) wire.ThreadInfo {
	b := t.Box()
	st := o.cfg.Fleet.Status(b) // recycling changes the lifetime and image id
	n := t.Clients()
	status := wire.SandboxRunning
	ictx, cancel := context.WithTimeout(ctx, inspectWait)
	defer cancel()
	sandboxID := b.SandboxID()
	if sb, err := o.cfg.Manager.Inspect(ictx, sandboxID); err != nil || !sb.Running {
		status = wire.SandboxExitedStatus
	}
	return wire.ThreadInfo{
		ID: t.ID(), Scope: b.Scope(), Assistant: b.Assistant(), Image: b.Image(), Runtime: b.Runtime(),
		Status: status, SandboxID: sandboxID, Created: t.Created(), Expires: st.Expires, ImageID: st.ImageID,
		IdleExpires: st.IdleExpires, Clients: n, Egress: st.Egress, Owner: o.cfg.Owners.OwnerOf(ictx, t.ID()),
		AgentVersion: st.Agent.Version, AgentHash: st.Agent.Hash, Posture: st.Agent.Posture,
	}
}

// List describes every live and suspended thread the caller of ctx may
// see, of owner ("" any), oldest first.
func (o *Ops) List(ctx context.Context, owner string) []wire.ThreadInfo {
	list := []wire.ThreadInfo{}
	for _, t := range o.cfg.Threads.Live() {
		list = append(list, o.Info(ctx, t))
	}
	list = append(list, o.storedInfos(ctx)...)
	list = o.cfg.Owners.Filter(ctx, list, owner) // bridge/users
	sort.Slice(list, func(i, j int) bool { return list[i].Created.Before(list[j].Created) })
	return list
}

// Get describes thread id, live or suspended, or fails with ErrNoThread.
func (o *Ops) Get(ctx context.Context, id string) (wire.ThreadInfo, error) {
	t, live := o.cfg.Threads.Lookup(id)
	if rec, ok := o.Suspended(ctx, id); !live && ok {
		info := o.suspendedInfo(rec)
		info.Owner = users.OwnerName(rec.Owner)
		return info, nil
	}
	if !live {
		return wire.ThreadInfo{}, ErrNoThread
	}
	return o.Info(ctx, t), nil
}

// Known reports whether thread id has a record or is live; err is the
// store's.
func (o *Ops) Known(ctx context.Context, id string) (bool, error) {
	_, ok, err := o.cfg.Records.Get(ctx, id)
	_, live := o.cfg.Threads.Lookup(id)
	return ok || live, err
}

// Suspended returns id's record when the thread is suspended: not live,
// and marked suspended in the records (fleet.SuspendedRecord).
func (o *Ops) Suspended(ctx context.Context, id string) (fleet.ThreadRecord, bool) {
	if _, live := o.cfg.Threads.Lookup(id); live {
		return fleet.ThreadRecord{}, false
	}
	return o.cfg.Fleet.SuspendedRecord(ctx, id)
}

// ThreadEgress checks the egress rules a thread asks for and returns them
// canonical (fleet.ThreadEgress); a refusal is a wire.Error.
func (o *Ops) ThreadEgress(rules []string) ([]string, error) {
	canon, err := o.cfg.Fleet.ThreadEgress(rules)
	if err != nil {
		return nil, WireError(err)
	}
	return canon, nil
}

// Flush waits for the store's queued appends.
func (o *Ops) Flush() { o.cfg.Events.Flush() }

// Events reads thread id's stored events (the export).
func (o *Ops) Events(id string, after uint64, limit int) ([]wire.Envelope, error) {
	return o.cfg.Events.Events(id, after, limit)
}

// suspendedInfo describes a suspended thread: Expires is when the thread
// retention removes it.
func (o *Ops) suspendedInfo(rec fleet.ThreadRecord) wire.ThreadInfo {
	at := *rec.Suspended
	return wire.ThreadInfo{
		ID: rec.ID, Scope: rec.Scope, Assistant: rec.Assistant, Image: rec.Image, Runtime: rec.Runtime,
		Status: wire.SandboxSuspended, Created: rec.Created, Expires: at.Add(o.cfg.ThreadTTL), Suspended: &at,
		Egress: rec.Egress,
	}
}

// storedInfos describes, from their records, every suspended thread and
// every thread another bridge relays (Config.Elsewhere).
func (o *Ops) storedInfos(ctx context.Context) []wire.ThreadInfo {
	recs, err := o.cfg.Records.List(ctx)
	if err != nil {
		o.cfg.Log.Error("list stored threads", "err", err)
	}
	var relays map[string]string
	if o.cfg.Elsewhere != nil {
		relays = o.cfg.Elsewhere(ctx)
	}
	var out []wire.ThreadInfo
	for _, r := range recs {
		if _, live := o.cfg.Threads.Lookup(r.ID); live {
			continue
		}
		switch relay := relays[r.ID]; {
		case r.Suspended != nil:
			out = append(out, o.suspendedInfo(r))
		case relay != "":
			out = append(out, wire.ThreadInfo{
				ID: r.ID, Scope: r.Scope, Assistant: r.Assistant, Image: r.Image, Runtime: r.Runtime,
				Status: wire.SandboxRunning, Created: r.Created, Egress: r.Egress, Relay: relay,
			})
		}
	}
	return out
}

// describe describes thread id after a change: live, or suspended; else
// it was deleted meanwhile (ErrNoThread).
func (o *Ops) describe(ctx context.Context, id string) (wire.ThreadInfo, error) {
	if t, live := o.cfg.Threads.Lookup(id); live {
		return o.Info(ctx, t), nil
	}
	if rec, ok := o.Suspended(ctx, id); ok {
		return o.suspendedInfo(rec), nil
	}
	return wire.ThreadInfo{}, ErrNoThread
}

// boxOf is the box of thread id (live, or in its record) and its record.
func (o *Ops) boxOf(ctx context.Context, id string) (boxID string, rec fleet.ThreadRecord, err error) {
	rec, stored, err := o.cfg.Records.Get(ctx, id)
	if err != nil {
		return "", rec, fmt.Errorf("read thread %s: %w", id, err)
	}
	if t, live := o.cfg.Threads.Lookup(id); live {
		return t.Box().ID(), rec, nil
	}
	if stored {
		return rec.Box, rec, nil
	}
	return "", rec, ErrNoThread
}

// untilServer is ctx, also ended when Config.Server ends.
func (o *Ops) untilServer(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(o.cfg.Server, cancel)
	return ctx, func() { stop(); cancel() }
}
