package fleet

import (
	"context"
	"fmt"
	"github.com/boxwire/boxwire/bridge/fleet/warm"
	"strings"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// checkImages looks up what the image references in use name now and
// moves what runs an older build (the image was rebuilt under the same
// tag, e.g. `make image`) or was moved to another image (Images.Move): the
// warm pool's old sandboxes are drained at once and refilled, live ones
// are replaced (recycle, reason image_update) at the rollout's pace and
// only while none of their threads works (rollout.go); busy ones on a
// later check. Boxes whose image id is unknown are left alone. It runs on
// the reaper's tick and at the end of Reconcile, and blocks for the
// engine. With a manager that cannot resolve images (Kubernetes: no
// sandbox.ImageResolver) only the moves are done: a box moved while busy
// moves at the first tick that finds it idle.
func (rp *reaper) checkImages(ctx context.Context) {
	f := rp.f
	res, resolves := f.cfg.Manager.(sandbox.ImageResolver)
	var boxes []*Box
	refs := map[string]bool{}
	f.mu.Lock()
	for _, b := range f.boxes {
		select {
		case <-b.ready:
		default:
			continue
		}
		if b.err == nil && !b.gone && b.planned == nil && (b.imageID != "" || b.moving) && (!b.pooled || b.thread != "") {
			boxes = append(boxes, b)
			refs[b.Image()] = true
		}
	}
	f.pool.ReadyLocked(func(key warm.Key, ready []*Box) {
		if len(ready) > 0 {
			refs[key.Image] = true
		}
	})
	f.mu.Unlock()
	now := map[string]string{} // image reference → its id, asked once per check
	for ref := range refs {
		if !resolves {
			break
		}
		id, err := res.ImageID(ctx, ref)
		if err != nil {
			f.log.Warn("resolve image", "image", ref, "err", err)
			continue
		}
		now[ref] = id
	}
	f.mu.Lock()
	f.roll.Learn(now)
	due := rp.dueLocked(boxes, time.Now())
	f.mu.Unlock()
	f.pool.DrainStale()
	for _, b := range due {
		f.mu.Lock()
		cur, busy, moving, want := b.imageID, b.busy(), b.moving, f.roll.Latest(b.Image())
		f.mu.Unlock()
		if busy { // a turn started meanwhile: it finishes on this build
			continue
		}
		msg := fmt.Sprintf("image %s updated from %s to %s", b.Image(), shortID(cur), shortID(want))
		if moving {
			msg = fmt.Sprintf("image changed to %s (%s)", b.Image(), shortID(want))
		}
		f.rep.recycle(ctx, b, wire.SandboxExited{Reason: wire.ExitImageUpdate, Message: msg})
	}
}

// shortID shortens an image id for messages: sha256:1f2e3d4c5b6a.
func shortID(id string) string {
	hex, ok := strings.CutPrefix(id, "sha256:")
	if ok && len(hex) > 12 {
		return "sha256:" + hex[:12]
	}
	return id
}
