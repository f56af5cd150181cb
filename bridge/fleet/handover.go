package fleet

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Handing a thread to another bridge on a shared store (docs/store.md,
// "Fail-over"): a bridge that lost a thread's lease lets go of its box
// (LetGo), and the one that took the lease adopts the running sandbox
// (TakeOver), its folders under the data folder its labelRoot names:
// <root>/run/<box> and <root>/agent/<box>.
const labelRoot = "boxwire.root"

var (
	// ErrRelayedElsewhere is Config.Claim's refusal when another bridge
	// holds the thread's lease: Reconcile leaves the sandbox to it.
	ErrRelayedElsewhere = errors.New("another bridge relays the thread")
	// ErrNoSandbox: TakeOver found no running sandbox of the thread.
	ErrNoSandbox = errors.New("no running sandbox of the thread to take over")
)

func rootLabel(l map[string]string, dirs boxdir.Dirs) map[string]string {
	l[labelRoot] = dirs.Root()
	return l
}

// sandboxOf returns the running thread-scope sandbox of box whose labels
// name thread id (or a pooled one, whose thread the records say:
// adoptPooled), and the layout of its folders.
func (f *Fleet) sandboxOf(ctx context.Context, box, id string) (sandbox.Sandbox, *boxdir.Layout, error) {
	return f.runningOf(ctx, box, func(l map[string]string) bool {
		return l[sandbox.LabelScope] == string(wire.ScopeThread) && (l[sandbox.LabelThread] == id || l[labelPool] == "1")
	})
}

// sharedOf returns the running shared sandbox of box, whose labels name
// assistant, and the layout of its folders.
func (f *Fleet) sharedOf(ctx context.Context, box, assistant string) (sandbox.Sandbox, *boxdir.Layout, error) {
	return f.runningOf(ctx, box, func(l map[string]string) bool {
		return l[sandbox.LabelScope] == string(wire.ScopeAssistant) && l[sandbox.LabelAssistant] == assistant
	})
}

// runningOf returns the running sandbox of box whose labels match, made
// by any bridge, and the layout of its folders (its labelRoot's).
func (f *Fleet) runningOf(ctx context.Context, box string, match func(map[string]string) bool) (sandbox.Sandbox, *boxdir.Layout, error) {
	list, err := f.cfg.Manager.List(ctx, map[string]string{sandbox.LabelBox: box})
	if err != nil {
		return sandbox.Sandbox{}, nil, fmt.Errorf("sandbox of box %s: %w", box, err)
	}
	for _, sb := range list {
		l, lay := sb.Labels, f.cfg.Layout
		if !sb.Running || !match(l) {
			continue
		}
		if root := l[labelRoot]; filepath.IsAbs(root) && filepath.Clean(root) == root {
			lay = lay.At(root)
		}
		return sb, lay, nil
	}
	return sandbox.Sandbox{}, nil, ErrNoSandbox
}

// runs reports whether the sandbox of stored thread r runs, whichever
// bridge made it.
func (f *Fleet) runs(ctx context.Context, r ThreadRecord) bool {
	var err error
	if r.Scope == wire.ScopeAssistant {
		_, _, err = f.sharedOf(ctx, r.Box, r.Assistant)
	} else {
		_, _, err = f.sandboxOf(ctx, r.Box, r.ID)
	}
	return err == nil
}

// clearLeftovers frees box id's name (boxwire-<id>) for a sandbox this
// bridge makes on its workspace (a resumed thread, an assistant taking
// its suspended workspace back): the box's stopped sandboxes, whichever
// bridge made them — one that died while no bridge relayed its threads,
// one a suspension or a dead bridge left — are removed, their workspace
// volume kept. A running one is left to its bridge, or to a takeover
// (TakeOver, TakeOverShared, which the caller tried first: one that runs
// now started meanwhile), and refused with sandbox_unavailable, which the
// client may try again, rather than the engine's name conflict. It
// blocks for the engine; the caller holds the box's lock.
func (f *Fleet) clearLeftovers(ctx context.Context, id string) error {
	list, err := f.cfg.Manager.List(ctx, map[string]string{sandbox.LabelBox: id})
	if err != nil {
		return fmt.Errorf("sandboxes of box %s: %w", id, err)
	}
	for _, sb := range list {
		if sb.Running {
			return wire.Error{Code: wire.CodeSandboxUnavailable, Message: fmt.Sprintf(
				"the workspace's sandbox %s still runs (box %s, made by bridge %s): try again", sb.Name, id, sb.Labels[sandbox.LabelOwner])}
		}
		if err := f.cfg.Manager.Remove(ctx, sb.ID); err != nil {
			return fmt.Errorf("remove stopped sandbox %s of box %s: %w", sb.ID, id, err)
		}
		f.log.Info("stopped sandbox of the box removed before it is made again", "box", id, "sandbox", sb.ID, "owner", sb.Labels[sandbox.LabelOwner])
	}
	return nil
}

// TakeOver adopts the running sandbox of thread id in box, made by
// another bridge (or an earlier run of this one), whose lease this bridge
// holds now: as Reconcile adopts, its proxies are served again in its
// folders and Config.Adopt takes its thread; sandbox, volume and agent
// go on. Thread scope only; ErrNoSandbox when none runs. It blocks for
// the engine and the agent.
func (f *Fleet) TakeOver(ctx context.Context, box, id string) error {
	sb, lay, err := f.sandboxOf(ctx, box, id)
	if err != nil {
		return err
	}
	if _, err := f.rec.adopt(ctx, sb, time.Now(), lay, true); err != nil {
		return fmt.Errorf("take over sandbox %s: %w", sb.ID, err)
	}
	return nil
}

// TakeOverShared returns the box of assistant's shared sandbox box for
// threads of it whose leases this bridge holds now (one bridge relays
// every thread of a shared sandbox): the box this fleet runs under that
// id, or the running sandbox another bridge (or an earlier run of this
// one) made, adopted as Reconcile adopts it once Config.ClaimShared took
// its live threads' leases, but with none of its threads: the caller
// joins each (Rejoin, Attach). The returned box counts a join begun
// (Box.joining), so the reaper leaves it alone until the caller calls
// Started. ErrNoSandbox when none runs. It blocks for the engine.
func (f *Fleet) TakeOverShared(ctx context.Context, box, assistant string) (*Box, error) {
	unlock := f.LockBox(box) // one adoption at a time: a second would serve its sockets again
	defer unlock()
	f.mu.Lock()
	if b := f.sharedBoxLocked(box); b != nil {
		b.joining++
		f.mu.Unlock()
		return b, nil
	}
	f.mu.Unlock()
	sb, lay, err := f.sharedOf(ctx, box, assistant)
	if err != nil {
		return nil, err
	}
	b, err := f.rec.adopt(ctx, sb, time.Now(), lay, false)
	if err != nil {
		return nil, fmt.Errorf("take over shared sandbox %s: %w", sb.ID, err)
	}
	return b, nil
}

// sharedBoxLocked returns the shared box whose id is id, made and
// running here, or nil. The caller holds f.mu.
func (f *Fleet) sharedBoxLocked(id string) *Box {
	for _, b := range f.boxes {
		select {
		case <-b.ready: // b.id is set
		default:
			continue
		}
		if b.id == id && b.scope == wire.ScopeAssistant && b.err == nil && !b.gone {
			return b
		}
	}
	return nil
}

// LetGo takes thread id out of b and removes nothing: when b was the
// thread's alone, or b is shared and id was its last thread, b leaves
// the fleet and its proxies stop, while its sandbox, volume and folders
// stay for the bridge that relays the thread now (closing a proxy leaves
// its socket, boxdir.Dirs.Listen); a shared box another bridge took
// over would otherwise be reaped here. A shared box stays with its other
// threads. Letting go twice is not an error.
func (f *Fleet) LetGo(b *Box, id string) error {
	if !f.Release(b, id) && !f.leaveEmpty(b) {
		return nil
	}
	<-b.ready // a member attached only once it was made
	f.pool.wakePool()
	return b.res.closeProxies()
}

// leaveEmpty takes b, a shared box, out of the fleet when it has no
// threads left, none joining, and reports whether it did.
func (f *Fleet) leaveEmpty(b *Box) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b.scope != wire.ScopeAssistant || b.gone || len(b.members) > 0 || b.joining > 0 {
		return false
	}
	b.gone = true
	if f.boxes[b.key] == b {
		delete(f.boxes, b.key)
	}
	return true
}
