package sandbox

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// ImageResolver is implemented by managers that can tell which image an
// image reference names now and which image a sandbox runs, so the bridge
// can notice an image rebuilt under the same reference (a new
// boxwire:latest) and replace the sandboxes still running the old one.
// Docker implements it. Both calls block for one engine round trip.
type ImageResolver interface {
	// ImageID returns the id ("sha256:…") of the image ref names now, or
	// an error wrapping ErrImageNotFound or ErrEngineUnavailable.
	ImageID(ctx context.Context, ref string) (string, error)
	// SandboxImageID returns the id of the image the sandbox was created
	// from, or an error wrapping ErrNotFound or ErrEngineUnavailable.
	SandboxImageID(ctx context.Context, id string) (string, error)
}

var _ ImageResolver = (*Docker)(nil)

// ImageID returns the id of the image ref names now.
func (d *Docker) ImageID(ctx context.Context, ref string) (string, error) {
	res, err := d.cli.ImageInspect(ctx, ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("inspect image %s: %w: %w", ref, ErrImageNotFound, err)
		}
		return "", fmt.Errorf("inspect image %s: %w", ref, d.mapErr(err, nil))
	}
	return res.ID, nil
}

// SandboxImageID returns the id of the image the sandbox runs.
func (d *Docker) SandboxImageID(ctx context.Context, id string) (string, error) {
	res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("inspect sandbox %s: %w", id, d.mapErr(err, ErrNotFound))
	}
	return res.Container.Image, nil
}
