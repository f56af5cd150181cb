package fleet

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/fleet/boxproxy"
	"github.com/boxwire/boxwire/bridge/fleet/greet"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// labelIdleTTL keeps a sandbox's idle TTL across bridge restarts.
const labelIdleTTL = "boxwire.idle_ttl"

// cleanupTimeout bounds removing what a failed creation left.
const cleanupTimeout = 30 * time.Second

// Box is one sandbox and what the bridge runs for it: host folders, LLM
// and egress proxies, container and workspace volume (res). Members attach
// to it: one in thread scope, any number in assistant scope. Fields above
// ready never change after creation; those below are guarded by the
// Fleet's mutex.
type Box struct {
	id        string // container boxwire-<id>, volume boxwire-ws-<id>, folder run/<id>
	key       string // key in Fleet.boxes
	scope     wire.Scope
	assistant string
	image     string // the image reference it was made with; Image says the current one
	runtime   string
	created   time.Time
	expires   time.Time
	idleTTL   time.Duration
	res       *resources
	px        *boxproxy.Proxies // the fleet's proxies: the box's LLM tokens (llmtoken.go)
	// pooled: started for the warm pool (pool.go), so id is not the
	// thread's; thread names the thread that took it (set at claim).
	pooled bool
	thread string
	// held: a pooled sandbox's agent connection, greeted under its future
	// thread's id, set before the pool offers it, taken by the claim.
	held *greet.Held
	// foreign: another bridge made the sandbox (its owner label), and this
	// one took it over (handover.go).
	foreign bool
	ready   chan struct{} // closed once creation ended; err says how
	err     error

	lastUsed time.Time
	members  map[string]Member
	// joining counts the threads being started in the box, from Acquire
	// until their Started; the reaper leaves the box alone meanwhile.
	joining int
	gone    bool // removed from Fleet.boxes; being or already removed

	// egress are the members' egress rules beside the bridge's, canonical
	// (egress.go); fixed at creation, at a pooled sandbox's claim, at
	// adoption and by SetEgress.
	egress []string

	// Replacement state (lifecycle.go); created and expires change when
	// the sandbox is recycled.
	imageID     string              // the image id the current sandbox runs ("" unknown)
	planned     *wire.SandboxExited // why the fleet is removing the current sandbox
	plannedAt   time.Time           // when planned was set
	lastReplace wire.SandboxExited  // why the newest replacement happened
	linked      map[string]string   // member id → the sandbox its agent link talks to
	dueSince    time.Time           // when a recycle became due and waited for work
	recreateMu  sync.Mutex          // serializes recreate; not Fleet.mu
	reuse       bool                // the workspace volume is a suspended thread's: kept on failure

	// Moving to another image (rollout.go): moved, when set, is the image
	// reference the box runs from its next sandbox on (Images.Move; safe
	// for concurrent use); moving says that replacement is still to come,
	// whatever the rollout's pace.
	moved  atomic.Pointer[string]
	moving bool
}

// ID is the box id: the sandbox's container is boxwire-<id>, its volume
// boxwire-ws-<id>.
func (b *Box) ID() string { return b.id }

// Scope is thread or assistant.
func (b *Box) Scope() wire.Scope { return b.scope }

// Assistant names the assistant of a shared box.
func (b *Box) Assistant() string { return b.assistant }

// Image is the image reference the box runs, or will from its next
// sandbox on when it was moved to another (Images.Move). It is safe for
// concurrent use.
func (b *Box) Image() string {
	if m := b.moved.Load(); m != nil {
		return *m
	}
	return b.image
}

// Runtime is the box's OCI runtime ("" the engine's default).
func (b *Box) Runtime() string { return b.runtime }

// IdleTTL is the box's idle TTL.
func (b *Box) IdleTTL() time.Duration { return b.idleTTL }

// SandboxID is the id of the box's current sandbox. It is safe for
// concurrent use; it changes when the sandbox is replaced.
func (b *Box) SandboxID() string { return b.res.sandbox() }

// Dirs are the box's host folders (the agent socket is dialled through
// them, boxdir.Dirs.DialAgent).
func (b *Box) Dirs() boxdir.Dirs { return b.res.dirs }

// Status is what the threads API shows of a box at one moment.
type Status struct {
	Expires     time.Time // the end of the sandbox's maximum lifetime
	IdleExpires time.Time // when it is suspended or removed if nobody uses it
	ImageID     string    // the image id it runs ("" unknown)
	Egress      []string  // the box's own egress rules
	// Agent is what the agent of the current sandbox named of its build
	// in its hello (zero before one answered).
	Agent AgentBuild
}

// Status describes b now.
func (f *Fleet) Status(b *Box) Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Status{Expires: b.expires, IdleExpires: b.lastUsed.Add(b.idleTTL).UTC().Truncate(time.Second),
		ImageID: b.imageID, Egress: slices.Clone(b.egress), Agent: b.res.build()}
}

// Options are the validated choices for a new thread's sandbox.
type Options struct {
	scope     wire.Scope
	assistant string
	image     string // the image reference it was made with; Image says the current one
	runtime   string
	idleTTL   time.Duration
	egress    []string // canonical thread egress rules (egress.go)
	// boxID, when set, is the box id (and so the workspace volume) a new
	// sandbox takes over from a suspended thread (suspend.go).
	boxID string
}

func boxKey(scope wire.Scope, name string) string { return string(scope) + ":" + name }

// NewThreadID returns a new random thread id, t_ and 12 hex digits.
func NewThreadID() string {
	id, _ := newBoxID("t_") // crypto/rand never fails
	return id
}

func newBoxID(prefix string) (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("box id: %w", err)
	}
	return prefix + hex.EncodeToString(b), nil
}

// Acquire returns a sandbox for the new thread threadID with its agent
// greeted and claimed on the returned connection: a ready pooled sandbox
// when one matches o, an assistant's shared sandbox when it runs, else a
// new one (o's box id, when set, takes a suspended thread's workspace
// back). It blocks while the sandbox is created (by this call or a
// concurrent one) and its agent answers, or until ctx ends. Creation fails
// with ErrLimit, without creating anything, when MaxSandboxes are live;
// pooled sandboxes count too, and one is evicted (and removed first) to
// make room. On success the caller must call Started once the thread's
// start is over; on failure nothing is left to undo.
func (f *Fleet) Acquire(ctx context.Context, o Options, threadID string) (*Box, *websocket.Conn, error) {
	if o.boxID == "" {
		if b, conn := (poolHost{f}).claim(ctx, o, threadID); b != nil { // pool.go
			return b, conn, nil
		}
	}
	return f.acquireGreeted(ctx, o, threadID)
}

func (f *Fleet) acquireGreeted(ctx context.Context, o Options, threadID string) (*Box, *websocket.Conn, error) {
	b, err := f.acquireBox(ctx, o, threadID)
	if err != nil {
		return nil, nil, err
	}
	conn, err := f.Greet(ctx, b, threadID)
	if err != nil {
		f.Started(b)
		f.Abandon(ctx, b)
		return nil, nil, err
	}
	return b, conn, nil
}

// AcquireNew is Acquire for a new thread whose id it chooses (returned
// first): a pooled sandbox's, whose agent was greeted under it (pool.go),
// else NewThreadID.
func (f *Fleet) AcquireNew(ctx context.Context, o Options) (string, *Box, *websocket.Conn, error) {
	if o.boxID == "" {
		if b, conn := (poolHost{f}).claim(ctx, o, ""); b != nil {
			return b.thread, b, conn, nil
		}
	}
	id := NewThreadID()
	b, conn, err := f.acquireGreeted(ctx, o, id)
	return id, b, conn, err
}

// acquireBox returns the running sandbox for o, creating it when needed
// (see Acquire), without greeting its agent.
func (f *Fleet) acquireBox(ctx context.Context, o Options, threadID string) (*Box, error) {
	key := boxKey(wire.ScopeThread, threadID)
	if o.scope == wire.ScopeAssistant {
		key = boxKey(wire.ScopeAssistant, o.assistant)
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, ErrClosing
	}
	b, ok := f.boxes[key]
	if o.boxID != "" && o.scope == wire.ScopeAssistant {
		if own := f.sharedBoxLocked(o.boxID); own != nil { // taken over, or kept under its id (handover.go)
			b, ok = own, true
		}
	}
	if ok {
		b.joining++
		f.mu.Unlock()
		if err := f.awaitBox(ctx, b, o); err != nil {
			f.Started(b)
			return nil, err
		}
		return b, nil
	}
	if max := f.cfg.MaxSandboxes; max > 0 && len(f.boxes) >= max {
		f.mu.Unlock()
		return nil, fmt.Errorf("%w: this bridge runs at most %d sandboxes", ErrLimit, max)
	}
	room := f.pool.MakeRoomLocked() // bridge/fleet/warm: pooled sandboxes count toward MaxSandboxes
	b = &Box{key: key, scope: o.scope, assistant: o.assistant, image: o.image, runtime: o.runtime,
		idleTTL: o.idleTTL, ready: make(chan struct{}), members: map[string]Member{}, egress: o.egress, joining: 1, px: f.px}
	b.created = time.Now().UTC().Truncate(time.Second)
	b.expires = b.created.Add(f.cfg.MaxLifetime)
	b.lastUsed = time.Now()
	f.boxes[key] = b
	f.mu.Unlock()

	b.id = threadID
	if o.scope == wire.ScopeAssistant {
		b.id, b.err = newBoxID("a_")
	}
	if o.boxID != "" { // suspend.go: a suspended thread's box and workspace
		b.id, b.reuse, b.err = o.boxID, true, nil
		if o.scope == wire.ScopeThread {
			b.thread = threadID
		}
	}
	if b.err == nil {
		b.err = room(ctx) // an evicted pooled sandbox is gone before this one is made
	}
	if b.err == nil {
		unlock := f.life.Box(b.id) // not while an old sandbox of this id is removed
		if b.reuse {
			b.err = f.find.ClearLeftovers(ctx, b.id) // the box's name free
		}
		if b.err == nil {
			b.err = f.startBox(ctx, b)
		}
		unlock()
	}
	if b.err != nil {
		f.mu.Lock()
		delete(f.boxes, key)
		f.mu.Unlock()
	}
	close(b.ready)
	return b, b.err
}

// awaitBox waits until b, made by another thread's start, is ready and
// adds o's egress rules to it.
func (f *Fleet) awaitBox(ctx context.Context, b *Box, o Options) error {
	select {
	case <-b.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	if b.err != nil {
		return b.err
	}
	return f.rules.join(b, o.egress) // egress.go
}

// Started ends a thread's start in b, whether the thread attached or
// not (see Box.joining): b's idle time counts from now.
func (f *Fleet) Started(b *Box) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b.joining--
	b.lastUsed = time.Now()
}

// Abandon removes b when the thread it was acquired for did not start and
// b was the thread's alone (thread scope); a suspended thread's workspace
// volume stays. A shared box stays.
func (f *Fleet) Abandon(ctx context.Context, b *Box) {
	if b.scope != wire.ScopeThread {
		return
	}
	f.forgetBox(b)
	res := b.res
	if b.reuse {
		res = res.keepingVolume()
	}
	f.removeResources(ctx, res, f.log.With("box", b.id))
}

// Attach makes m a member of b, unless the fleet is stopping or b is gone.
func (f *Fleet) Attach(b *Box, m Member) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closed:
		return ErrClosing
	case b.gone:
		return errBoxGone
	}
	b.members[m.ID()] = m
	b.lastUsed = time.Now()
	return nil
}

// errBoxGone: a thread's sandbox was removed while it was starting.
var errBoxGone = fmt.Errorf("the sandbox was removed while the thread was starting")

// Release takes thread id out of b and reports whether the thread owned
// b alone (thread scope): b is then out of the fleet and the caller
// removes it with Remove. Releasing twice is not an error.
func (f *Fleet) Release(b *Box, id string) (owned bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(b.members, id)
	b.lastUsed = time.Now()
	if b.scope != wire.ScopeThread || b.gone {
		return false
	}
	b.gone = true
	if f.boxes[b.key] == b {
		delete(f.boxes, b.key)
	}
	return true
}

// Remove removes a box Release gave up: its sandbox, workspace volume,
// proxies and folders. It blocks for the engine.
func (f *Fleet) Remove(ctx context.Context, b *Box) error {
	err := b.res.remove(ctx, f.cfg.Manager)
	f.pool.Wake() // there may be room for a pooled sandbox again
	return err
}

// startBox creates b's host folders, proxies and sandbox. It does not
// wait for the agent. On failure it removes what it made.
func (f *Fleet) startBox(ctx context.Context, b *Box) (err error) {
	b.res = &resources{runtime: b.runtime}
	log := f.log.With("box", b.id)
	defer func() {
		if err != nil {
			if b.reuse {
				b.res.volume = "" // a suspended thread's workspace stays
			}
			f.removeResources(ctx, b.res, log)
		}
	}()
	// Make removes folders a suspended box's failed removal left.
	if b.res.dirs, err = f.cfg.Layout.Make(b.id); err != nil {
		return err
	}
	if b.res.proxy, err = f.px.ServeLLM(b.res.dirs, log); err != nil { // boxproxy
		return err
	}
	if b.res.egress, err = f.px.ServeEgress(b.res.dirs, log); err != nil {
		return err
	}
	spec := f.spec(b)
	b.res.volume = spec.WorkspaceVolume
	sb, err := f.cfg.Manager.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	b.res.setSandbox(sb.ID)
	f.rep.recordImage(ctx, b) // lifecycle.go
	log.Info("sandbox created", "sandbox", sb.ID, "image", b.Image(), "scope", b.scope, "runtime", b.runtime)
	return nil
}

// labels are the labels of b's container and volume, a sandbox of the
// bridge bridgeID.
func (b *Box) labels(bridgeID string) map[string]string {
	l := map[string]string{
		sandbox.LabelOwner:   bridgeID,
		sandbox.LabelScope:   string(b.scope),
		sandbox.LabelBox:     b.id,
		sandbox.LabelCreated: b.created.Format(time.RFC3339),
		sandbox.LabelExpires: b.expires.Format(time.RFC3339),
		labelIdleTTL:         b.idleTTL.String(),
	}
	if b.scope == wire.ScopeAssistant {
		l[sandbox.LabelAssistant] = b.assistant
	} else if !b.pooled {
		l[sandbox.LabelThread] = cmp.Or(b.thread, b.id) // b.thread: a resumed thread in another box id
	}
	if b.pooled {
		poolLabels(b, l) // pool.go
	}
	return l
}

// spec says how to run b's sandbox. It carries no key: the agent reaches
// the model through the proxy socket, and its LLM token comes with the
// claim (greet.Greeter.Dial).
func (f *Fleet) spec(b *Box) sandbox.Spec {
	env := []string{
		"BOXWIRE_LISTEN=unix:" + sandbox.AgentMount + "/" + AgentSocket,
		"BOXWIRE_LLM_SOCKET=" + sandbox.SocketMount + "/" + boxproxy.LLMSocket,
		"OPENAI_BASE_URL=http://boxwire-llm/v1",
	}
	env = append(env, f.px.Env()...) // the egress socket and CA
	if f.cfg.Model != "" {
		env = append(env, "BOXWIRE_MODEL="+f.cfg.Model)
	}
	return sandbox.Spec{
		Name:            "boxwire-" + b.id,
		Image:           b.Image(),
		Runtime:         b.runtime,
		Env:             env,
		Labels:          rootLabel(b.labels(f.cfg.BridgeID), b.res.dirs), // handover.go
		SocketDir:       b.res.dirs.Bridge,
		AgentDir:        b.res.dirs.Agent,
		WorkspaceVolume: "boxwire-ws-" + b.id,
		User:            fmt.Sprintf("%d:%d", f.cfg.SandboxUID, f.cfg.SandboxGID),
		AgentBinary:     f.cfg.AgentBinary,
	}
}

// removeResources removes res, logging failures (the caller has an error
// or nobody to tell), on a context detached from ctx.
func (f *Fleet) removeResources(ctx context.Context, res *resources, log *slog.Logger) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := res.remove(cctx, f.cfg.Manager); err != nil {
		log.Error("remove sandbox resources", "err", err)
	}
	f.pool.Wake() // there may be room for a pooled sandbox again
}

// forgetBox takes b out of the fleet's boxes and marks it gone.
func (f *Fleet) forgetBox(b *Box) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.boxes[b.key] == b {
		delete(f.boxes, b.key)
	}
	b.gone = true
}
