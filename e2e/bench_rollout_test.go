package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// benchUpdateVisible: "update visible to all idle threads" (issue 20) —
// idle threads on a test tag, the tag rebuilt with a new agent binary (only
// that layer changes, as make image does), and the time from the end of
// that build until every thread's info names the new agent version. The
// bridge runs with its defaults: the reaper notices the new build on its
// next tick (--reap-interval, 30 s by default) and the rollout moves every
// idle thread at once (no --rollout-batch), so the figure is about a tick
// plus one sandbox replacement. The build itself is the rebuild figure's.
func benchUpdateVisible(t *testing.T, _ *env, r *report) {
	t.Run("update_visible", func(t *testing.T) { // its own bridge, images and sandboxes, cleaned up here
		const threads = 10
		ai := newAgentImages(t)
		tag := "boxwire-bench-rollout:" + randHex(6)
		oldV, newV := "bench-old-"+randHex(4), "bench-new-"+randHex(4)
		ai.build(tag, oldV)
		e := newEnv(t, helloScript)
		e.startBridge("BOXWIRE_IMAGE="+tag, "BOXWIRE_MAX_SANDBOXES=0")
		e.cleanAtEnd()
		var ids []string
		for range threads {
			ids = append(ids, e.createThread(wire.CreateThread{}).ID)
		}
		for _, id := range ids {
			if v := e.threadInfo(id).AgentVersion; v != oldV {
				t.Fatalf("thread %s runs agent %q before the rebuild, want %q", id, v, oldV)
			}
		}
		watch := e.watchVersions(ids, newV)
		ai.build(tag, newV)
		rebuilt := time.Now()
		var times []time.Time
		select {
		case times = <-watch:
		case <-time.After(5 * time.Minute):
			t.Fatal("not every idle thread reached the new agent within 5 minutes")
		}
		first, last := times[0].Sub(rebuilt), times[len(times)-1].Sub(rebuilt)
		// No target in the issue: this one is the reaper's tick at its
		// default (30 s, when the new build is noticed) plus one
		// replacement (≤ 10 s).
		r.add(figure{name: "update_visible_idle", value: last.Seconds(), unit: "s",
			target: "≤ 40 s (one 30 s reaper tick + a replacement)", met: met(last <= 40*time.Second),
			note: fmt.Sprintf("rebuild of the image tag with a new agent binary → all %d idle threads report it in thread info (first after %.1f s); default reap interval and rollout pace", threads, first.Seconds())})
	})
}
