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
	list, err := f.cfg.Manager.List(ctx, map[string]string{sandbox.LabelBox: box})
	if err != nil {
		return sandbox.Sandbox{}, nil, fmt.Errorf("sandbox of box %s: %w", box, err)
	}
	for _, sb := range list {
		l, lay := sb.Labels, f.cfg.Layout
		if !sb.Running || l[sandbox.LabelScope] != string(wire.ScopeThread) || (l[sandbox.LabelThread] != id && l[labelPool] != "1") {
			continue
		}
		if root := l[labelRoot]; filepath.IsAbs(root) && filepath.Clean(root) == root {
			lay = lay.At(root)
		}
		return sb, lay, nil
	}
	return sandbox.Sandbox{}, nil, ErrNoSandbox
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
	if err := f.rec.adopt(ctx, sb, time.Now(), lay); err != nil {
		return fmt.Errorf("take over sandbox %s: %w", sb.ID, err)
	}
	return nil
}

// LetGo takes thread id out of b and removes nothing: when b was the
// thread's alone, b leaves the fleet and its proxies stop, while its
// sandbox, volume and folders stay for the bridge that relays the thread
// now (closing a proxy leaves its socket, boxdir.Dirs.Listen). A shared
// box stays with its other threads. Letting go twice is not an error.
func (f *Fleet) LetGo(b *Box, id string) error {
	if !f.Release(b, id) {
		return nil
	}
	<-b.ready // a member attached only once it was made
	f.pool.wakePool()
	return b.res.closeProxies()
}
