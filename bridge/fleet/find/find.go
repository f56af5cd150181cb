// Package find finds the sandboxes that run in the engine, whichever
// bridge made them, by the labels bridge/fleet gives them, and frees a
// box's name of stopped ones: what a takeover, a resumption and a
// fleet's start (Reconcile) ask of the engine beside the fleet's own
// books. Each call blocks for the engine.
package find

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/fleet/records"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// The labels of the fleet's sandboxes that find reads besides sandbox's.
const (
	// LabelPool marks a sandbox started for the warm pool: its box id
	// (p_…) is not its thread's id, and until a thread takes it no label,
	// environment variable or socket names one (docs/pool.md).
	LabelPool = "boxwire.pool"
	// LabelRoot names the data folder under which a sandbox's folders
	// are, so that another bridge taking it over finds its sockets.
	LabelRoot = "boxwire.root"
)

// ErrNoSandbox: no running sandbox of the thread (or the box) was found.
var ErrNoSandbox = errors.New("no running sandbox of the thread to take over")

// Finder finds the running sandboxes of the engine Manager; their folders
// are under Layout unless their LabelRoot says otherwise.
type Finder struct {
	Manager sandbox.Manager
	Layout  *boxdir.Layout
	Log     *slog.Logger // nil: discarded
}

// Thread returns the running thread-scope sandbox of box whose labels
// name thread id (or a pooled one, whose thread the fleet's records say),
// and the layout of its folders.
func (fd Finder) Thread(ctx context.Context, box, id string) (sandbox.Sandbox, *boxdir.Layout, error) {
	return fd.running(ctx, box, func(l map[string]string) bool {
		return l[sandbox.LabelScope] == string(wire.ScopeThread) && (l[sandbox.LabelThread] == id || l[LabelPool] == "1")
	})
}

// Shared returns the running shared sandbox of box, whose labels name
// assistant, and the layout of its folders.
func (fd Finder) Shared(ctx context.Context, box, assistant string) (sandbox.Sandbox, *boxdir.Layout, error) {
	return fd.running(ctx, box, func(l map[string]string) bool {
		return l[sandbox.LabelScope] == string(wire.ScopeAssistant) && l[sandbox.LabelAssistant] == assistant
	})
}

// running returns the running sandbox of box whose labels match, made
// by any bridge, and the layout of its folders (its LabelRoot's).
func (fd Finder) running(ctx context.Context, box string, match func(map[string]string) bool) (sandbox.Sandbox, *boxdir.Layout, error) {
	list, err := fd.Manager.List(ctx, map[string]string{sandbox.LabelBox: box})
	if err != nil {
		return sandbox.Sandbox{}, nil, fmt.Errorf("sandbox of box %s: %w", box, err)
	}
	for _, sb := range list {
		l, lay := sb.Labels, fd.Layout
		if !sb.Running || !match(l) {
			continue
		}
		if root := l[LabelRoot]; filepath.IsAbs(root) && filepath.Clean(root) == root {
			lay = lay.At(root)
		}
		return sb, lay, nil
	}
	return sandbox.Sandbox{}, nil, ErrNoSandbox
}

// Runs reports whether the sandbox of the stored thread r runs,
// whichever bridge made it.
func (fd Finder) Runs(ctx context.Context, r records.Thread) bool {
	var err error
	if r.Scope == wire.ScopeAssistant {
		_, _, err = fd.Shared(ctx, r.Box, r.Assistant)
	} else {
		_, _, err = fd.Thread(ctx, r.Box, r.ID)
	}
	return err == nil
}

// ClearLeftovers frees box id's name (boxwire-<id>) for a sandbox this
// bridge makes on its workspace (a resumed thread, an assistant taking
// its suspended workspace back): the box's stopped sandboxes, whichever
// bridge made them — one that died while no bridge relayed its threads,
// one a suspension or a dead bridge left — are removed, their workspace
// volume kept. A running one is left to its bridge, or to a takeover
// (the fleet's TakeOver, TakeOverShared, which the caller tried first: one that runs
// now started meanwhile), and refused with sandbox_unavailable, which the
// client may try again, rather than the engine's name conflict. It
// blocks for the engine; the caller holds the box's lock.
func (fd Finder) ClearLeftovers(ctx context.Context, id string) error {
	list, err := fd.Manager.List(ctx, map[string]string{sandbox.LabelBox: id})
	if err != nil {
		return fmt.Errorf("sandboxes of box %s: %w", id, err)
	}
	for _, sb := range list {
		if sb.Running {
			return wire.Error{Code: wire.CodeSandboxUnavailable, Message: fmt.Sprintf(
				"the workspace's sandbox %s still runs (box %s, made by bridge %s): try again", sb.Name, id, sb.Labels[sandbox.LabelOwner])}
		}
		if err := fd.Manager.Remove(ctx, sb.ID); err != nil {
			return fmt.Errorf("remove stopped sandbox %s of box %s: %w", sb.ID, id, err)
		}
		fd.log().Info("stopped sandbox of the box removed before it is made again", "box", id, "sandbox", sb.ID, "owner", sb.Labels[sandbox.LabelOwner])
	}
	return nil
}

func (fd Finder) log() *slog.Logger {
	if fd.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return fd.Log
}
