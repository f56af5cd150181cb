package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Options validates a thread creation request against the config: scope,
// assistant, image and runtime allowlists, idle TTL and egress rules (a
// wire.Error says what it refuses).
func (f *Fleet) Options(req wire.CreateThread) (Options, error) {
	o := Options{scope: req.Scope, assistant: req.Assistant, image: req.Image, runtime: req.Runtime, idleTTL: f.cfg.IdleTTL}
	notAllowed := func(format string, args ...any) (Options, error) {
		return Options{}, wire.Error{Code: wire.CodeNotAllowed, Message: fmt.Sprintf(format, args...)}
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
		o.image = f.cfg.Image
	} else if allowed := f.imgs.all(); !slices.Contains(allowed, o.image) { // rollout.go
		return notAllowed("image %q is not allowed (allowed: %v)", o.image, allowed)
	}
	if o.runtime == "" {
		o.runtime = f.cfg.Runtime
	} else if !slices.Contains(append([]string{f.cfg.Runtime}, f.cfg.Runtimes...), o.runtime) {
		return notAllowed("runtime %q is not allowed", o.runtime)
	}
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d <= 0 {
			return Options{}, wire.Error{Code: wire.CodeBadMessage, Message: "ttl must be a positive duration like 10m"}
		}
		o.idleTTL = min(d, f.cfg.IdleTTL)
	}
	rules, err := f.ThreadEgress(req.Egress) // egress.go
	if err != nil {
		return Options{}, err
	}
	o.egress = rules
	return o, nil
}

// WithSuspendedWorkspace returns o taking back the workspace of its
// assistant's newest suspended box, if it has one (suspend.go, a box
// with no live thread); o itself in thread scope. A box whose sandbox
// still runs on another bridge (one that suspends it now, or one that
// died suspending it) is not taken: the new thread gets a sandbox of its
// own rather than the box's name, which that sandbox holds. It blocks for
// one records read and, when there is such a box, one engine list.
func (f *Fleet) WithSuspendedWorkspace(ctx context.Context, o Options) Options {
	if o.scope != wire.ScopeAssistant {
		return o
	}
	id := f.book.NewestSuspended(ctx, o.assistant)
	if id == "" {
		return o
	}
	f.mu.Lock()
	own := f.sharedBoxLocked(id) != nil
	f.mu.Unlock()
	if !own {
		if _, _, err := f.find.Shared(ctx, id, o.assistant); !errors.Is(err, ErrNoSandbox) { // handover.go
			f.log.Info("the assistant's suspended workspace is in use: a new one for the thread", "box", id, "assistant", o.assistant, "err", err)
			return o
		}
	}
	o.boxID = id
	return o
}

// ResumeOptions are the options of the suspended thread rec's next
// sandbox: its scope, image, runtime, idle TTL and egress rules, and its
// box id, so it takes its workspace volume back.
func (f *Fleet) ResumeOptions(rec ThreadRecord) Options {
	return Options{scope: rec.Scope, assistant: rec.Assistant, image: rec.Image, runtime: rec.Runtime,
		idleTTL: cmp.Or(rec.IdleTTL, f.cfg.IdleTTL), egress: rec.Egress, boxID: rec.Box}
}

// validName reports whether n is a valid box, thread or assistant name:
// 1-64 letters, digits, '.', '_' or '-'.
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
