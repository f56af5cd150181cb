package sandbox

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// maxRemovals is how many container removals Remove sends the engine at
// once. Deleting 300 threads at once sent it 300 forced removals, and
// dockerd 20.10 deadlocked in one run of three (libnetwork: an exiting
// container's endpoint.Delete holds its network's lock while it waits on
// the controller's watch channel, whose reader waits for that lock; every
// sandbox is on the one `none` network). A few at a time keep the engine's
// throughput (a removal is mostly the engine waiting for the kill and the
// unmounts) without hundreds of exits on one network at once.
const maxRemovals = 8

// Inspect returns the sandbox's current state: Running, and ExitCode and
// OOMKilled once it has stopped. A missing sandbox is an error wrapping
// ErrNotFound.
func (d *Docker) Inspect(ctx context.Context, id string) (Sandbox, error) {
	res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return Sandbox{}, fmt.Errorf("inspect sandbox %s: %w", id, d.mapErr(err, ErrNotFound))
	}
	c := res.Container
	sb := Sandbox{
		ID:   c.ID,
		Name: strings.TrimPrefix(c.Name, "/"),
	}
	if c.Config != nil {
		sb.Image = c.Config.Image
		sb.Labels = maps.Clone(c.Config.Labels)
	}
	if c.State != nil {
		sb.Running = c.State.Running
		sb.ExitCode = c.State.ExitCode
		sb.OOMKilled = c.State.OOMKilled
	}
	if c.HostConfig != nil {
		sb.Runtime = c.HostConfig.Runtime
	}
	if t, err := time.Parse(time.RFC3339Nano, c.Created); err == nil {
		sb.Created = t
	}
	return sb, nil
}

// Stop sends the sandbox's stop signal and kills it when it has not exited
// after grace (rounded up to whole seconds; zero or less kills at once). It
// blocks until the sandbox has stopped or ctx ends, so ctx should outlive
// grace. Stopping a stopped sandbox is not an error; a missing one is an
// error wrapping ErrNotFound.
func (d *Docker) Stop(ctx context.Context, id string, grace time.Duration) error {
	secs := 0
	if grace > 0 {
		secs = int((grace + time.Second - 1) / time.Second)
	}
	_, err := d.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs})
	if err != nil {
		return fmt.Errorf("stop sandbox %s: %w", id, d.mapErr(err, ErrNotFound))
	}
	return nil
}

// Remove kills and deletes the sandbox's container, but not its workspace
// volume; a capped workspace's loop device is detached when no other
// container uses the volume (workspace_detach.go). A sandbox that does not
// exist is not an error. It blocks until the engine has removed the
// container.
//
// An engine under load may refuse or fail a removal for a while (a removal
// already in progress, a mount still busy): Remove tries again, with a
// growing pause, until the container is gone or ctx ends.
//
// At most maxRemovals removals reach the engine at once; the others wait
// their turn (within ctx).
func (d *Docker) Remove(ctx context.Context, id string) error {
	select {
	case d.removing <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("remove sandbox %s: waiting for the engine's other removals: %w", id, ctx.Err())
	}
	defer func() { <-d.removing }()
	ws := d.cappedWorkspaceOf(ctx, id)
	err := retryRemoval(ctx, func() error {
		_, err := d.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
		return err
	})
	if err != nil {
		return fmt.Errorf("remove sandbox %s: %w", id, d.mapErr(err, nil))
	}
	if ws != "" {
		d.detachUnused(ctx, ws) // its last user gone: no loop device until the next Create
	}
	return nil
}

// RemoveVolume deletes a workspace volume and, for a capped one, detaches
// its loop device and deletes its image file (workspace.go). A missing
// volume is not an error (a leftover image of that name is still
// deleted); one still used by a container is.
func (d *Docker) RemoveVolume(ctx context.Context, name string) error {
	var opts map[string]string
	if res, err := d.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{}); err == nil {
		opts = res.Volume.Options
	}
	// A volume is "in use" until the engine has finished removing its
	// container; under load that can outlast the container's Remove.
	err := retryRemoval(ctx, func() error {
		_, err := d.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("remove volume %s: %w", name, d.mapErr(err, nil))
	}
	if err := d.ws.release(ctx, name, opts); err != nil {
		return fmt.Errorf("remove volume %s: %w", name, err)
	}
	return nil
}

// List returns the sandboxes, in any state, whose labels include all of
// labels (every sandbox when labels is empty). The engine's list carries no
// exit status: ExitCode and OOMKilled are zero here; Inspect one for them.
func (d *Docker) List(ctx context.Context, labels map[string]string) ([]Sandbox, error) {
	f := client.Filters{}
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", d.mapErr(err, nil))
	}
	out := make([]Sandbox, 0, len(res.Items))
	for _, c := range res.Items {
		out = append(out, fromSummary(c))
	}
	return out, nil
}

// ListVolumes returns the names of the volumes whose labels include all of
// labels (every volume when labels is empty).
func (d *Docker) ListVolumes(ctx context.Context, labels map[string]string) ([]string, error) {
	f := client.Filters{}
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	res, err := d.cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", d.mapErr(err, nil))
	}
	out := make([]string, 0, len(res.Items))
	for _, v := range res.Items {
		out = append(out, v.Name)
	}
	return out, nil
}

// fromSummary converts a list entry.
func fromSummary(c container.Summary) Sandbox {
	sb := Sandbox{
		ID:      c.ID,
		Image:   c.Image,
		Labels:  maps.Clone(c.Labels),
		Running: c.State == container.StateRunning,
		Created: time.Unix(c.Created, 0),
	}
	if len(c.Names) > 0 {
		sb.Name = strings.TrimPrefix(c.Names[0], "/")
	}
	return sb
}

// Pauses between tries of a removal the engine failed.
const (
	removeRetryFirst = 100 * time.Millisecond
	removeRetryMax   = 2 * time.Second
)

// retryRemoval calls remove until it succeeds, or finds nothing to
// remove (not found), or ctx ends, pausing longer after each failure. It
// returns the last failure.
func retryRemoval(ctx context.Context, remove func() error) error {
	pause := removeRetryFirst
	for {
		err := remove()
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		if client.IsErrConnectionFailed(err) {
			return err // no engine to ask: the caller reports it unavailable
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, removeRetryMax)
	}
}
