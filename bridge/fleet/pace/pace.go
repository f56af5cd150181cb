package pace

import (
	"cmp"
	"slices"
	"time"
)

// DefaultInterval is the pause between two batches of a rollout with a
// batch size.
const DefaultInterval = 30 * time.Second

// Config paces a rollout. The zero value moves every idle sandbox on the
// tick that finds its image rebuilt.
type Config struct {
	// Batch is how many live sandboxes start moving per Interval; 0: all
	// idle ones at once.
	Batch int
	// Interval is the pause between batches (with Batch set); 0:
	// DefaultInterval. Batches start on reaper ticks, so a pause shorter
	// than the reap interval is one tick.
	Interval time.Duration
	// Paused starts the fleet with live sandboxes held on their build
	// (the pool still refills with the new one).
	Paused bool
}

// Rollout is the rollout state of one fleet. It is not safe for
// concurrent use: its caller locks.
type Rollout struct {
	cfg    Config
	paused bool
	last   time.Time         // when the last batch started
	latest map[string]string // image reference → the id it named at the last look
}

// New returns the rollout of cfg, paused when cfg.Paused.
func New(cfg Config) *Rollout {
	return &Rollout{cfg: cfg, paused: cfg.Paused, latest: map[string]string{}}
}

// Batch is how many sandboxes move per Interval (0: all at once).
func (r *Rollout) Batch() int { return r.cfg.Batch }

// Interval is the pause between batches.
func (r *Rollout) Interval() time.Duration { return cmp.Or(r.cfg.Interval, DefaultInterval) }

// Paused reports whether live sandboxes are held on their build.
func (r *Rollout) Paused() bool { return r.paused }

// Pause holds live sandboxes on their build (paused) or lets the rollout
// go on; it reports whether that changed anything.
func (r *Rollout) Pause(paused bool) (changed bool) {
	changed, r.paused = r.paused != paused, paused
	return changed
}

// Learn records what image references name now (ids by reference; a
// reference that could not be resolved is left out).
func (r *Rollout) Learn(ids map[string]string) {
	for ref, id := range ids {
		if id != "" {
			r.latest[ref] = id
		}
	}
}

// Latest is the id image reference ref named at the last look ("" not
// looked up yet).
func (r *Rollout) Latest(ref string) string { return r.latest[ref] }

// Stale reports whether a sandbox of image reference ref running image id
// runs an older build than ref names (as last looked up).
func (r *Rollout) Stale(ref, id string) bool {
	want := r.latest[ref]
	return want != "" && id != "" && id != want
}

// Sandbox is a live sandbox none of whose threads works, as Due sees it.
type Sandbox struct {
	Image   string    // the image reference it runs, or will once moved
	ImageID string    // the image id it runs ("" unknown)
	Moving  bool      // moved to Image and not yet replaced
	Created time.Time // when its lifetime began
}

// Due picks, of the idle sandboxes, those to replace at now and returns
// their indexes: every one moved to another image, and those on an old
// build at the rollout's pace — none while paused, all without a batch
// size, else at most Batch (oldest first) once Interval has passed since
// the last batch.
func (r *Rollout) Due(idle []Sandbox, now time.Time) (due []int) {
	var stale []int
	for i, sb := range idle {
		want := r.latest[sb.Image]
		switch {
		case sb.Moving && (want == "" || want != sb.ImageID):
			due = append(due, i)
		case r.Stale(sb.Image, sb.ImageID):
			stale = append(stale, i)
		}
	}
	if r.paused || len(stale) == 0 {
		return due
	}
	if n := r.cfg.Batch; n > 0 {
		if !r.last.IsZero() && now.Sub(r.last) < r.Interval() {
			return due
		}
		slices.SortFunc(stale, func(a, b int) int { return idle[a].Created.Compare(idle[b].Created) })
		stale = stale[:min(n, len(stale))]
		r.last = now
	}
	return append(due, stale...)
}
