// Package collect is the sandbox half of `bridge gc`: it removes every
// sandbox and workspace volume a bridge id labelled, and its socket
// folders (server.Collect forgets the threads too). It imports sandbox and
// boxdir, never the fleet or the server.
package collect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/sandbox"
)

// Collect removes every sandbox and workspace volume labelled with
// bridgeID and every socket folder under <dataDir>/run (dataDir "": none):
// the sandbox half of `bridge gc` (server.Collect forgets the threads
// too). A sandbox whose thread relayed says another bridge relays now
// (it took the sandbox over, docs/store.md "Fail-over") stays, with its
// volume and folders; relayed nil keeps nothing. Run it only when no
// bridge with that id is running. It returns how many sandboxes and
// volumes it removed.
func Collect(ctx context.Context, mgr sandbox.Manager, bridgeID, dataDir string, relayed func(thread string) bool) (sandboxes, volumes int, err error) {
	owner := map[string]string{sandbox.LabelOwner: bridgeID}
	list, err := mgr.List(ctx, owner)
	if err != nil {
		return 0, 0, fmt.Errorf("gc: %w", err)
	}
	var errs []error
	kept := map[string]bool{} // box ids
	for _, sb := range list {
		if th := sb.Labels[sandbox.LabelThread]; relayed != nil && th != "" && relayed(th) {
			kept[sb.Labels[sandbox.LabelBox]] = true
			continue
		}
		if err := mgr.Remove(ctx, sb.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		sandboxes++
	}
	vols, err := mgr.ListVolumes(ctx, owner)
	if err != nil {
		return sandboxes, 0, errors.Join(append(errs, fmt.Errorf("gc: %w", err))...)
	}
	for _, v := range vols {
		if kept[strings.TrimPrefix(v, "boxwire-ws-")] {
			continue
		}
		if err := mgr.RemoveVolume(ctx, v); err != nil {
			errs = append(errs, err)
			continue
		}
		volumes++
	}
	if dataDir != "" {
		errs = append(errs, removeFolders(dataDir, kept))
	}
	return sandboxes, volumes, errors.Join(errs...)
}

// removeFolders removes the sandbox folders under dataDir but kept's.
func removeFolders(dataDir string, kept map[string]bool) error {
	l := boxdir.New(boxdir.Config{Root: dataDir})
	ids, err := l.IDs()
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	var errs []error
	for _, id := range ids {
		if !kept[id] {
			errs = append(errs, l.Remove(id))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	return nil
}

// Strays removes the workspace volumes labelled with bridgeID whose box id
// keepVolume does not name, and the socket folders of layout whose box id
// keepFolder does not name: what no sandbox uses any longer (the fleet's
// Reconcile calls it at start, after adopting the sandboxes it keeps).
func Strays(ctx context.Context, mgr sandbox.Manager, bridgeID string, layout *boxdir.Layout,
	keepVolume, keepFolder func(box string) bool, log *slog.Logger) error {
	vols, err := mgr.ListVolumes(ctx, map[string]string{sandbox.LabelOwner: bridgeID})
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	var errs []error
	for _, v := range vols {
		if id, ok := strings.CutPrefix(v, "boxwire-ws-"); ok && keepVolume(id) {
			continue
		}
		log.Info("removing stray volume", "volume", v)
		errs = append(errs, mgr.RemoveVolume(ctx, v))
	}
	ids, err := layout.IDs()
	if err != nil {
		errs = append(errs, err)
	}
	for _, id := range ids {
		if !keepFolder(id) {
			errs = append(errs, layout.Remove(id))
		}
	}
	return errors.Join(errs...)
}
