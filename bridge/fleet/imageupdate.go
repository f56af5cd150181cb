package fleet

import (
	"context"
	"fmt"
	"strings"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// checkImages replaces the sandboxes whose image reference now names
// another image id than the one they run (the image was rebuilt under the
// same tag, e.g. `make image`): idle ones at once (recycle, reason
// image_update), busy ones on a later check once their work ended. Boxes
// whose image id is unknown are left alone. It runs on the reaper's tick
// and at the end of Reconcile, and blocks for the engine.
func (rp *reaper) checkImages(ctx context.Context) {
	res, ok := rp.f.cfg.Manager.(sandbox.ImageResolver)
	if !ok {
		return
	}
	var boxes []*Box
	rp.f.mu.Lock()
	for _, b := range rp.f.boxes {
		select {
		case <-b.ready:
		default:
			continue
		}
		if b.err == nil && !b.gone && b.planned == nil && b.imageID != "" && (!b.pooled || b.thread != "") {
			boxes = append(boxes, b)
		}
	}
	rp.f.mu.Unlock()
	now := map[string]string{} // image reference → its id, asked once per check
	for _, b := range boxes {
		want, asked := now[b.image]
		if !asked {
			id, err := res.ImageID(ctx, b.image)
			if err != nil {
				rp.f.log.Warn("resolve image", "image", b.image, "err", err)
			}
			now[b.image], want = id, id
		}
		rp.f.mu.Lock()
		cur, busy := b.imageID, rp.f.boxBusy(b)
		rp.f.mu.Unlock()
		if want == "" || want == cur || busy {
			continue
		}
		rp.f.recycle(ctx, b, wire.SandboxExited{Reason: wire.ExitImageUpdate,
			Message: fmt.Sprintf("image %s updated from %s to %s", b.image, shortID(cur), shortID(want))})
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
