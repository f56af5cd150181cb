package pace_test

import (
	"slices"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet/pace"
)

func TestDue(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	idle := []pace.Sandbox{
		{Image: "img", ImageID: "sha256:old", Created: t0.Add(2 * time.Hour)},
		{Image: "img", ImageID: "sha256:old", Created: t0},
		{Image: "img", ImageID: "sha256:new", Created: t0},
		{Image: "img", ImageID: "", Created: t0},                             // unknown: left alone
		{Image: "other", ImageID: "sha256:x", Moving: true, Created: t0},     // moved here, not yet replaced
		{Image: "unseen", ImageID: "sha256:y", Moving: true, Created: t0},    // moved, reference not looked up
		{Image: "other", ImageID: "sha256:other", Moving: true, Created: t0}, // moved and on it already
	}
	for _, tc := range []struct {
		name string
		cfg  pace.Config
		want []int
	}{
		{"all at once", pace.Config{}, []int{4, 5, 0, 1}},
		{"paused holds the old builds, not the moves", pace.Config{Paused: true}, []int{4, 5}},
		{"a batch takes the oldest first", pace.Config{Batch: 1}, []int{4, 5, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := pace.New(tc.cfg)
			r.Learn(map[string]string{"img": "sha256:new", "other": "sha256:other", "gone": ""})
			if got := r.Due(idle, t0); !slices.Equal(got, tc.want) {
				t.Fatalf("Due = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDueWaitsForTheInterval(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := pace.New(pace.Config{Batch: 1, Interval: time.Minute})
	r.Learn(map[string]string{"img": "sha256:new"})
	idle := []pace.Sandbox{{Image: "img", ImageID: "sha256:old"}, {Image: "img", ImageID: "sha256:old"}}
	steps := []struct {
		at   time.Duration
		want int
	}{{0, 1}, {30 * time.Second, 0}, {time.Minute, 1}}
	for _, s := range steps {
		if got := r.Due(idle, t0.Add(s.at)); len(got) != s.want {
			t.Fatalf("at +%v: %d due, want %d", s.at, len(got), s.want)
		}
	}
}

func TestStaleAndPause(t *testing.T) {
	t.Parallel()
	r := pace.New(pace.Config{})
	if r.Stale("img", "sha256:old") {
		t.Fatal("stale before any look")
	}
	r.Learn(map[string]string{"img": "sha256:new"})
	if !r.Stale("img", "sha256:old") || r.Stale("img", "sha256:new") || r.Stale("img", "") {
		t.Fatal("Stale does not compare with the newest look")
	}
	if !r.Pause(true) || r.Pause(true) || !r.Paused() || !r.Pause(false) {
		t.Fatal("Pause does not report changes")
	}
	if r.Interval() != pace.DefaultInterval || r.Latest("img") != "sha256:new" {
		t.Fatalf("Interval %v, Latest %q", r.Interval(), r.Latest("img"))
	}
}
