package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// connectWait bounds Connect's checks of the engine and the host.
const connectWait = 10 * time.Second

// ErrWorkspaceUnsupported means workspaces are capped but the host cannot
// make capped workspaces (see CheckWorkspaces).
var ErrWorkspaceUnsupported = errors.New("capped workspaces are not possible on this host")

// Connect makes a Docker manager for cfg and checks, within ten seconds,
// that the engine answers (else the error wraps ErrEngineUnavailable) and
// that capped workspaces can be made when cfg asks for them (else it wraps
// ErrWorkspaceUnsupported). The caller closes the manager.
func Connect(ctx context.Context, cfg DockerConfig) (*Docker, error) {
	d, err := NewDocker(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, connectWait)
	defer cancel()
	if err := d.Ping(ctx); err != nil {
		d.Close()
		return nil, fmt.Errorf("the container engine is not reachable (is Docker running? host %q): %w", cfg.Host, err)
	}
	if err := d.CheckWorkspaces(ctx); err != nil {
		d.Close()
		return nil, fmt.Errorf("%w: %w", ErrWorkspaceUnsupported, err)
	}
	return d, nil
}
