package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// A suspension racing a resumption through another bridge: two bridges on
// one PostgreSQL, a thread whose sandbox the relaying bridge's reaper
// suspends once it has been idle for 1 s, and a client that comes back,
// through either bridge in turn, at moments before, around and after the
// suspension. Every round's turn ends once; the thread ends each round
// with exactly one running sandbox, the one its record names, on
// whichever bridge; the log stays 1..N; and deleting the thread through
// the other bridge leaves no container or volume of it on either.
func TestStorePostgresSuspendRacesResume(t *testing.T) {
	_, url := postgres(t)
	envs := startBridges(t, 2, helloScript, "BOXWIRE_STORE="+url, "BOXWIRE_LEASE_TTL="+failoverTTL.String(),
		"BOXWIRE_IDLE_TTL=1s", "BOXWIRE_REAP_INTERVAL=50ms")
	th := envs[0].createThread(wire.CreateThread{})
	labels := map[string]string{"boxwire.thread": th.ID}
	sandboxes := func() (running, all []sandbox.Sandbox) {
		for _, e := range envs {
			for _, sb := range e.containers(labels) {
				all = append(all, sb)
				if sb.Running {
					running = append(running, sb)
				}
			}
		}
		return running, all
	}
	book := newSeqBook()
	// The idle timer starts when the last client leaves; the reaper looks
	// every 50 ms, so its suspension falls in 1.0-1.1 s, and the engine's
	// stop and removal take a while after that.
	waits := []time.Duration{300, 900, 1000, 1030, 1060, 1090, 1120, 1150, 1200, 1300, 1500, 2500}
	suspended := 0
	for i, ms := range waits {
		via := envs[i%2]
		w, err := via.redial(th.ID, book, time.Now().Add(turnTimeout))
		if err != nil {
			t.Fatalf("round %d: attach through bridge %d: %v", i, i%2, err)
		}
		id := w.say(t, fmt.Sprintf("round %d", i))
		book.await(t, fmt.Sprintf("round %d's turn_done", i), turnTimeout, isType(wire.TypeTurnDone, id))
		var info wire.ThreadInfo
		defer func() {
			if t.Failed() {
				running, all := sandboxes()
				t.Logf("round %d: running %v of %v; the thread info %+v", i, ids(running), ids(all), info)
			}
		}()
		waitFor(t, fmt.Sprintf("round %d: one running sandbox, the thread's", i), func() bool {
			running, _ := sandboxes()
			if code := envs[1-i%2].api(http.MethodGet, "/v1/threads/"+th.ID, nil, &info); code != http.StatusOK {
				return false
			}
			return len(running) == 1 && strings.HasPrefix(running[0].ID, info.SandboxID)
		})
		w.close()
		time.Sleep(ms * time.Millisecond)
		if envs[0].threadInfo(th.ID).Status == wire.SandboxSuspended {
			suspended++
		}
	}
	top := book.check(t)
	n := 0
	for _, ev := range book.events() {
		if ev.Type == wire.TypeTurnDone {
			n++
		}
	}
	if n != len(waits) {
		t.Errorf("%d turn_done events for %d turns", n, len(waits))
	}
	if suspended == 0 {
		t.Error("the thread was never suspended between rounds: the race was not run")
	}

	if code := envs[1].api(http.MethodDelete, "/v1/threads/"+th.ID, nil, nil); code != http.StatusNoContent && code != http.StatusOK {
		t.Fatalf("delete the thread through bridge 1: %d", code)
	}
	waitFor(t, "nothing of the thread left on either bridge", func() bool {
		_, all := sandboxes()
		return len(all) == 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	if vols, err := envs[0].engine.ListVolumes(ctx, labels); err != nil || len(vols) > 0 {
		t.Errorf("the thread's volumes after its deletion: %v, %v", vols, err)
	}
	t.Logf("%d rounds, suspended after %d of them; seqs 1..%d", len(waits), suspended, top)
}

// ids are the sandboxes' ids, shortened.
func ids(sbs []sandbox.Sandbox) []string {
	out := make([]string, len(sbs))
	for i, sb := range sbs {
		out[i] = sb.ID[:min(12, len(sb.ID))]
	}
	return out
}
