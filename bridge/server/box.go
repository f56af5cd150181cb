package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// labelIdleTTL keeps a sandbox's idle TTL across bridge restarts.
const labelIdleTTL = "boxwire.idle_ttl"

// errLimit, errClosing: see errorFor and the threads API.
var (
	errLimit   = errors.New("sandbox limit reached")
	errClosing = errors.New("bridge shutting down")
)

// box is one sandbox and what the bridge runs for it: socket folder, LLM
// proxy, container and workspace volume (res). Threads attach to it: one in
// thread scope, any number in assistant scope. Fields above ready never
// change after creation; those below are guarded by Server.mu.
type box struct {
	id        string // container boxwire-<id>, volume boxwire-ws-<id>, folder run/<id>
	key       string // key in Server.boxes
	scope     wire.Scope
	assistant string
	image     string
	runtime   string
	created   time.Time
	expires   time.Time
	idleTTL   time.Duration
	res       *resources
	// pooled: started for the warm pool (pool.go), so id is not the
	// thread's; thread names the thread that took it (set at claim).
	pooled bool
	thread string
	ready  chan struct{} // closed once creation ended; err says how
	err    error

	lastUsed time.Time
	threads  map[string]*thread
	// joining counts the threads being started in the box, from
	// acquireBox or takePooled until their creator calls joined; the
	// reaper leaves the box alone meanwhile.
	joining int
	gone    bool // removed from Server.boxes; being or already removed

	// egress are the threads' egress rules beside the bridge's, canonical
	// (egress_thread.go); fixed at creation, at a pooled sandbox's claim
	// and at adoption.
	egress []string

	// Replacement state (lifecycle.go), also guarded by Server.mu; created
	// and expires change when the sandbox is recycled.
	imageID     string              // the image id the current sandbox runs ("" unknown)
	planned     *wire.SandboxExited // why the bridge is removing the current sandbox
	plannedAt   time.Time           // when planned was set
	lastReplace wire.SandboxExited  // why the newest replacement happened
	linked      map[string]string   // thread id → the sandbox its agent link talks to
	dueSince    time.Time           // when a recycle became due and waited for work
	recreateMu  sync.Mutex          // serializes recreate; not Server.mu
	reuse       bool                // the workspace volume is a suspended thread's: kept on failure
}

// boxOptions are the validated choices for a new thread's sandbox.
type boxOptions struct {
	scope     wire.Scope
	assistant string
	image     string
	runtime   string
	idleTTL   time.Duration
	egress    []string // canonical thread egress rules (egress_thread.go)
	// boxID, when set, is the box id (and so the workspace volume) a new
	// sandbox takes over from a suspended thread (suspend.go).
	boxID string
}

func boxKey(scope wire.Scope, name string) string { return string(scope) + ":" + name }

func newBoxID(prefix string) (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("box id: %w", err)
	}
	return prefix + hex.EncodeToString(b), nil
}

// acquireBox returns the running sandbox for o, creating it when needed:
// an assistant's shared sandbox is reused; a thread's is always new
// (threadID names it). It blocks while the sandbox is created (by this call
// or a concurrent one) or until ctx ends. Creation fails with errLimit,
// without creating anything, when MaxSandboxes are live; pooled sandboxes
// count too, and one is evicted (and removed first) to make room.
func (s *Server) acquireBox(ctx context.Context, o boxOptions, threadID string) (*box, error) {
	key := boxKey(wire.ScopeThread, threadID)
	if o.scope == wire.ScopeAssistant {
		key = boxKey(wire.ScopeAssistant, o.assistant)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errClosing
	}
	if b, ok := s.boxes[key]; ok {
		b.joining++
		s.mu.Unlock()
		if err := s.awaitBox(ctx, b, o); err != nil {
			s.joined(b)
			return nil, err
		}
		return b, nil
	}
	if max := s.cfg.MaxSandboxes; max > 0 && len(s.boxes) >= max {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: this bridge runs at most %d sandboxes", errLimit, max)
	}
	room := s.poolRoomLocked() // pool_limit.go: pooled sandboxes count toward MaxSandboxes
	b := &box{key: key, scope: o.scope, assistant: o.assistant, image: o.image, runtime: o.runtime,
		idleTTL: o.idleTTL, ready: make(chan struct{}), threads: map[string]*thread{}, egress: o.egress, joining: 1}
	b.created = time.Now().UTC().Truncate(time.Second)
	b.expires = b.created.Add(s.cfg.MaxLifetime)
	b.lastUsed = time.Now()
	s.boxes[key] = b
	s.mu.Unlock()

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
		unlock := s.life.Lock("box:" + b.id) // lifecycle.go: not while an old sandbox of this id is removed
		b.err = s.startBox(ctx, b)
		unlock()
	}
	if b.err != nil {
		s.mu.Lock()
		delete(s.boxes, key)
		s.mu.Unlock()
	}
	close(b.ready)
	return b, b.err
}

// awaitBox waits until b, made by another thread's start, is ready and
// adds o's egress rules to it.
func (s *Server) awaitBox(ctx context.Context, b *box, o boxOptions) error {
	select {
	case <-b.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	if b.err != nil {
		return b.err
	}
	return s.joinEgress(b, o.egress) // egress_thread.go
}

// joined ends a thread's start in b, whether the thread registered or
// not (see box.joining): b's idle time counts from now.
func (s *Server) joined(b *box) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b.joining--
	b.lastUsed = time.Now()
}

// startBox creates b's socket folder, LLM proxy and sandbox. It does not
// wait for the agent. On failure it removes what it made.
func (s *Server) startBox(ctx context.Context, b *box) (err error) {
	b.res = &resources{runtime: b.runtime}
	log := s.log.With("box", b.id)
	defer func() {
		if err != nil {
			if b.reuse {
				b.res.volume = "" // a suspended thread's workspace stays
			}
			s.removeResources(ctx, b.res, log)
		}
	}()
	// Make removes folders a suspended box's failed removal left.
	if b.res.dirs, err = s.dirs.Make(b.id); err != nil {
		return err
	}
	if b.res.proxy, err = s.serveProxy(b.res.dirs, log); err != nil {
		return err
	}
	if b.res.egress, err = s.serveEgress(b.res.dirs, log); err != nil {
		return err
	}
	spec := s.spec(b)
	b.res.volume = spec.WorkspaceVolume
	sb, err := s.cfg.Manager.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	b.res.setSandbox(sb.ID)
	s.recordImage(ctx, b) // lifecycle.go
	log.Info("sandbox created", "sandbox", sb.ID, "image", b.image, "scope", b.scope, "runtime", b.runtime)
	return nil
}

// serveProxy serves a new LLM proxy on llm.sock in the bridge folder.
func (s *Server) serveProxy(dirs boxdir.Dirs, log *slog.Logger) (*llmproxy.Listener, error) {
	llmCfg := s.cfg.LLM
	llmCfg.Logger = log.With("component", "llmproxy")
	llmCfg = s.securedLLM(llmCfg, dirs.ID())
	proxy, err := llmproxy.New(llmCfg)
	if err != nil {
		return nil, err
	}
	ln, err := dirs.Listen(llmSocket)
	if err != nil {
		return nil, err
	}
	return proxy.Serve(ln), nil
}

// labels are the labels of b's container and volume.
func (s *Server) labels(b *box) map[string]string {
	l := map[string]string{
		sandbox.LabelOwner:   s.cfg.BridgeID,
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

// removeResources removes res, logging failures (the caller has an error
// or nobody to tell), on a context detached from ctx.
func (s *Server) removeResources(ctx context.Context, res *resources, log *slog.Logger) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := res.remove(cctx, s.cfg.Manager); err != nil {
		log.Error("remove sandbox resources", "err", err)
	}
	s.wakePool() // pool.go: there may be room for a pooled sandbox again
}

// boxOptionsFor validates a thread creation request against the config.
func (s *Server) boxOptionsFor(req wire.CreateThread) (boxOptions, error) {
	o := boxOptions{scope: req.Scope, assistant: req.Assistant, image: req.Image, runtime: req.Runtime, idleTTL: s.cfg.IdleTTL}
	notAllowed := func(format string, args ...any) (boxOptions, error) {
		return boxOptions{}, wire.Error{Code: wire.CodeNotAllowed, Message: fmt.Sprintf(format, args...)}
	}
	switch o.scope {
	case "", wire.ScopeThread:
		o.scope = wire.ScopeThread
		if o.assistant != "" {
			return notAllowed("assistant is only for scope %q", wire.ScopeAssistant)
		}
	case wire.ScopeAssistant:
		if !validName(o.assistant) {
			return notAllowed("scope assistant needs an assistant id of 1-64 letters, digits, '.', '_' or '-'")
		}
	default:
		return notAllowed("unknown scope %q", o.scope)
	}
	if o.image == "" {
		o.image = s.cfg.Image
	} else if !slices.Contains(s.images(), o.image) {
		return notAllowed("image %q is not allowed (allowed: %v)", o.image, s.images())
	}
	if o.runtime == "" {
		o.runtime = s.cfg.Runtime
	} else if !slices.Contains(append([]string{s.cfg.Runtime}, s.cfg.Runtimes...), o.runtime) {
		return notAllowed("runtime %q is not allowed", o.runtime)
	}
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d <= 0 {
			return boxOptions{}, wire.Error{Code: wire.CodeBadMessage, Message: "ttl must be a positive duration like 10m"}
		}
		o.idleTTL = min(d, s.cfg.IdleTTL)
	}
	rules, err := s.threadEgress(req) // egress_thread.go
	if err != nil {
		return boxOptions{}, err
	}
	o.egress = rules
	return o, nil
}

// images is the allowlist: the default image and Config.Images.
func (s *Server) images() []string { return append([]string{s.cfg.Image}, s.cfg.Images...) }

func validName(n string) bool {
	if n == "" || len(n) > 64 {
		return false
	}
	for _, r := range n {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

// parseIdleTTL reads labelIdleTTL, falling back to def.
func parseIdleTTL(v string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	return def
}
