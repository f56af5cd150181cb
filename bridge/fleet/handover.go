package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/fleet/find"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Handing a thread to another bridge on a shared store (docs/store.md,
// "Fail-over"): a bridge that lost a thread's lease lets go of its box
// (LetGo), and the one that took the lease adopts the running sandbox
// (TakeOver), its folders under the data folder its label find.LabelRoot
// names: <root>/run/<box> and <root>/agent/<box>.

var (
	// ErrRelayedElsewhere is Config.Claim's refusal when another bridge
	// holds the thread's lease: Reconcile leaves the sandbox to it.
	ErrRelayedElsewhere = errors.New("another bridge relays the thread")
	// ErrNoSandbox: TakeOver found no running sandbox of the thread.
	ErrNoSandbox = find.ErrNoSandbox
)

func rootLabel(l map[string]string, dirs boxdir.Dirs) map[string]string {
	l[find.LabelRoot] = dirs.Root()
	return l
}

// TakeOver adopts the running sandbox of thread id in box, made by
// another bridge (or an earlier run of this one), whose lease this bridge
// holds now: as Reconcile adopts, its proxies are served again in its
// folders and Config.Adopt takes its thread; sandbox, volume and agent
// go on. Thread scope only; ErrNoSandbox when none runs. It blocks for
// the engine and the agent.
func (f *Fleet) TakeOver(ctx context.Context, box, id string) error {
	sb, lay, err := f.find.Thread(ctx, box, id)
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
	unlock := f.life.Box(box) // one adoption at a time: a second would serve its sockets again
	defer unlock()
	f.mu.Lock()
	if b := f.sharedBoxLocked(box); b != nil {
		b.joining++
		f.mu.Unlock()
		return b, nil
	}
	f.mu.Unlock()
	sb, lay, err := f.find.Shared(ctx, box, assistant)
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
	f.pool.Wake()
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
