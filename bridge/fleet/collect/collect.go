// Package collect is the sandbox half of `bridge gc`: it removes every
// sandbox and workspace volume a bridge id labelled, and its socket
// folders (server.Collect forgets the threads too). It imports sandbox and
// boxdir, never the fleet or the server.
package collect

import (
	"context"
	"errors"
	"fmt"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/sandbox"
)

// Collect removes every sandbox and workspace volume labelled with
// bridgeID and every socket folder under <dataDir>/run (dataDir "": none):
// the sandbox half of `bridge gc` (server.Collect forgets the threads
// too). Run it only when no bridge with that id is running. It returns how
// many sandboxes and volumes it removed.
func Collect(ctx context.Context, mgr sandbox.Manager, bridgeID, dataDir string) (sandboxes, volumes int, err error) {
	owner := map[string]string{sandbox.LabelOwner: bridgeID}
	list, err := mgr.List(ctx, owner)
	if err != nil {
		return 0, 0, fmt.Errorf("gc: %w", err)
	}
	var errs []error
	for _, sb := range list {
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
		if err := mgr.RemoveVolume(ctx, v); err != nil {
			errs = append(errs, err)
			continue
		}
		volumes++
	}
	if dataDir != "" {
		if err := boxdir.RemoveAll(dataDir); err != nil {
			errs = append(errs, fmt.Errorf("gc: %w", err))
		}
	}
	return sandboxes, volumes, errors.Join(errs...)
}
