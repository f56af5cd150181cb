package sandbox

import (
	"context"
	"os"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// A capped workspace's loop device is needed only while a container uses
// its volume. Remove detaches it when the removed sandbox was the volume's
// last container (a suspended thread keeps its workspace but should not
// keep a loop device); the next Create attaches it again. The volume's lock
// keeps that detach from racing a Create of the same volume: Create holds
// it from the attach until its container exists, and Remove holds it while
// it looks for other containers and detaches.

// cappedWorkspaceOf returns the name of the capped workspace volume that
// sandbox id mounts, or "" when it has none (or cannot be inspected).
func (d *Docker) cappedWorkspaceOf(ctx context.Context, id string) string {
	if d.ws.cfg.Dir == "" {
		return ""
	}
	res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return ""
	}
	for _, m := range res.Container.Mounts {
		if m.Type != mount.TypeVolume || m.Destination != WorkspaceMount || !volumeNameRE.MatchString(m.Name) {
			continue
		}
		if img, _ := d.ws.paths(m.Name); fileExists(img) {
			return m.Name
		}
	}
	return ""
}

// detachUnused detaches the loop device of the capped workspace volume
// when no container (in any state) uses the volume any more. A failure is
// logged: the sandbox is gone, and an attached loop device only costs a
// little kernel memory until RemoveVolume.
func (d *Docker) detachUnused(ctx context.Context, volume string) {
	unlock := d.ws.volumes.Lock(volume)
	defer unlock()
	f := client.Filters{}
	f.Add("volume", volume)
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil || len(res.Items) > 0 {
		return
	}
	img, _ := d.ws.paths(volume)
	if err := d.ws.detach(ctx, img); err != nil {
		d.log.Warn("detach workspace of removed sandbox", "volume", volume, "err", err)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
