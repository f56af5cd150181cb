package fleet

import (
	"cmp"
	"context"
	"fmt"
	"github.com/boxwire/boxwire/bridge/fleet/warm"
	"slices"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet/pace"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Rollouts: how sandboxes move to a new build of their image (a rebuild
// under the same tag, `make image`) or to another image (Images.Move), at
// the pace bridge/fleet/pace keeps.
// checkImages (imageupdate.go) resolves the image references in use on
// every reaper tick and hands the result here: pooled sandboxes on an old
// build are drained at once and the pool refills (pool.go: drainStale,
// and claims skip them); live sandboxes move at the configured pace, only
// while none of their threads works, unless the rollout is paused.

// DefaultRolloutInterval is the pause between two batches of a rollout
// with a batch size.
const DefaultRolloutInterval = pace.DefaultInterval

// RolloutConfig paces a rollout (pace.Config). The zero value moves every
// idle sandbox on the tick that finds its image rebuilt.
type RolloutConfig = pace.Config

// dueLocked picks, of boxes, those to replace now (pace.Rollout.Due):
// every idle box moved to another image (Images.Move), and the idle boxes
// on an old build at the rollout's pace. A box whose member works waits
// for a later tick. The caller holds f.mu.
func (rp *reaper) dueLocked(boxes []*Box, now time.Time) []*Box {
	var idle []*Box
	var sbs []pace.Sandbox
	for _, b := range boxes {
		if b.gone || b.planned != nil || b.busy() {
			continue
		}
		idle = append(idle, b)
		sbs = append(sbs, pace.Sandbox{Image: b.Image(), ImageID: b.imageID, Moving: b.moving, Created: b.created})
	}
	var due []*Box
	for _, i := range rp.f.roll.Due(sbs, now) {
		due = append(due, idle[i])
	}
	return due
}

// RolloutStatus is what GET /v1/rollout shows: the pace, whether it is
// paused, and per image reference in use what runs it.
type RolloutStatus struct {
	Paused bool `json:"paused"`
	// Batch is how many sandboxes move per Interval (0: all at once).
	Batch    int          `json:"batch"`
	Interval string       `json:"interval,omitempty"`
	Images   []ImageUsage `json:"images"`
}

// ImageUsage is one image reference in use.
type ImageUsage struct {
	Image string `json:"image"`
	// ImageID is what the reference named at the last look ("" not yet
	// looked up).
	ImageID string `json:"image_id,omitempty"`
	// Sandboxes and Threads are the live sandboxes of this reference and
	// their threads; Behind counts those sandboxes on an older build (or
	// moved here and not yet replaced); Pooled the warm pool's ready ones.
	Sandboxes int `json:"sandboxes"`
	Threads   int `json:"threads"`
	Behind    int `json:"behind"`
	Pooled    int `json:"pooled"`
}

// Images are the images of a fleet's threads (Fleet.Images): which a
// thread may ask for, a box moved to another, and the rollout of rebuilt
// ones. Its state is guarded by the fleet's lock; it is safe for
// concurrent use.
type Images struct {
	f *Fleet
	// allowed are the images besides Config.Image a thread may use (Set).
	allowed []string
}

// Images returns the fleet's images and their rollout.
func (f *Fleet) Images() *Images { return &f.imgs }

// Rollout describes the rollout now, images sorted by reference.
func (im *Images) Rollout() RolloutStatus {
	f := im.f
	f.mu.Lock()
	defer f.mu.Unlock()
	st := RolloutStatus{Paused: f.roll.Paused(), Batch: f.roll.Batch(), Images: []ImageUsage{}}
	if st.Batch > 0 {
		st.Interval = f.roll.Interval().String()
	}
	use := map[string]*ImageUsage{}
	of := func(ref string) *ImageUsage {
		if use[ref] == nil {
			use[ref] = &ImageUsage{Image: ref, ImageID: f.roll.Latest(ref)}
		}
		return use[ref]
	}
	for _, b := range f.boxes {
		select {
		case <-b.ready:
		default:
			continue // still being created
		}
		if b.gone || b.err != nil {
			continue
		}
		u := of(b.Image())
		u.Sandboxes++
		u.Threads += len(b.members)
		if b.moving || f.roll.Stale(b.Image(), b.imageID) {
			u.Behind++
		}
	}
	f.pool.ReadyLocked(func(key warm.Key, ready []*Box) {
		if len(ready) > 0 {
			of(key.Image).Pooled += len(ready)
		}
	})
	for _, u := range use {
		st.Images = append(st.Images, *u)
	}
	slices.SortFunc(st.Images, func(a, b ImageUsage) int { return cmp.Compare(a.Image, b.Image) })
	return st
}

// Pause holds live sandboxes on their build (paused) or lets the rollout
// go on from the next reaper tick. Moves (Move) and the pool are not
// held.
func (im *Images) Pause(paused bool) {
	f := im.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.roll.Pause(paused) {
		f.log.Info("rollout", "paused", paused)
	}
}

// Set replaces the images a thread may ask for besides the default image
// (Config.Images; the bridge reloads them on SIGHUP). Threads already on
// an image no longer listed keep it.
func (im *Images) Set(images []string) {
	im.f.mu.Lock()
	defer im.f.mu.Unlock()
	im.allowed = slices.Clone(images)
}

// all is the allowlist: the default image and the others allowed.
func (im *Images) all() []string {
	im.f.mu.Lock()
	defer im.f.mu.Unlock()
	return append([]string{im.f.cfg.Image}, im.allowed...)
}

// List returns the images a thread may ask for now: the default image
// first, then the others allowed (Config.Images, as Set last set them),
// each once.
func (im *Images) List() []string {
	var out []string
	for _, ref := range im.all() {
		if ref != "" && !slices.Contains(out, ref) {
			out = append(out, ref)
		}
	}
	return out
}

// Move gives box boxID the image reference image, which must be
// allowed (a wire.Error not_allowed says it is not), keeping its workspace
// and its threads' conversations: the records of every thread of the box
// name the new image (a suspended thread resumes on it); a live box is
// replaced at once when none of its threads works, else as soon as its
// work ended, whatever the rollout's pace. It returns the image the box
// had and its threads, live or stored, sorted. It blocks for the records
// and, for an idle live box, the engine's stop of the old sandbox.
func (im *Images) Move(ctx context.Context, boxID, image string) (prev string, ids []string, err error) {
	f := im.f
	if allowed := im.all(); !slices.Contains(allowed, image) {
		return "", nil, wire.Error{Code: wire.CodeNotAllowed, Message: fmt.Sprintf("image %q is not allowed (allowed: %v)", image, allowed)}
	}
	unlockBox := f.life.Box(boxID)
	live := f.liveBox(boxID)
	if live != nil {
		prev = live.Image()
		f.mu.Lock()
		if image != prev {
			live.moved.Store(&image)
			live.moving = true
		}
		for tid := range live.members {
			ids = append(ids, tid)
		}
		f.mu.Unlock()
	}
	ids, prev, err = f.book.SetImage(ctx, boxID, image, ids, prev)
	unlockBox()
	if err != nil || live == nil || image == prev {
		return prev, ids, err
	}
	f.mu.Lock()
	busy := live.busy()
	f.mu.Unlock()
	if !busy {
		f.rep.recycle(ctx, live, wire.SandboxExited{Reason: wire.ExitImageUpdate,
			Message: fmt.Sprintf("image changed from %s to %s", prev, image)})
	}
	return prev, ids, nil
}

// liveBox returns the live, ready box whose id is id, or nil.
func (f *Fleet) liveBox(id string) *Box {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.boxes {
		select {
		case <-b.ready:
		default:
			continue // still being created: no thread of it answers yet
		}
		if b.id == id && !b.gone && b.err == nil {
			return b
		}
	}
	return nil
}
