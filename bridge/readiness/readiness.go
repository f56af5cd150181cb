// Package readiness is a bridge's GET /readyz — whether the parts it
// cannot serve without (its store, its engine) answer — and its question
// to the other bridges on a shared store: is the store down for you too?
// A bridge cut off from the store past its leases' expiry asks it
// (docs/store.md, "Fail-over"): when every other bridge says its store is
// down as well, nobody can take a lease meanwhile, and it keeps relaying
// its threads.
package readiness

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Timeout bounds each check of GET /readyz.
const Timeout = 5 * time.Second

// askWait bounds asking another bridge whether it reaches the store:
// longer than its own check of the store takes (Timeout).
const askWait = Timeout + time.Second

// Checks are what GET /readyz asks, each bounded by Timeout.
type Checks struct {
	Store  func(context.Context) error // the event store
	Engine func(context.Context) error // the sandbox engine
}

// Handler answers GET /readyz: 200 "ready" when every check passes, else
// 503 with a "store: …" or "engine: …" line for each that does not (a
// load balancer sends new clients elsewhere; GET /healthz only says the
// process serves). StoreDownEverywhere reads the "store:" line.
func Handler(c Checks) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), Timeout)
		defer cancel()
		var msg string
		if err := c.Store(ctx); err != nil {
			msg += "store: " + err.Error() + "\n"
		}
		if err := c.Engine(ctx); err != nil {
			msg += "engine: " + err.Error() + "\n"
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if msg != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(msg))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	}
}

// StoreDownEverywhere reports whether the bridges at peers (announced
// addresses) agree that the store is down: none reaches it, and at least
// one says it does not. True when there are no peers (nobody could take a
// lease), false when none answers (they may reach the store, and the
// asking bridge not them). It asks them all at once, each for at most
// a few seconds.
func StoreDownEverywhere(ctx context.Context, peers []string) bool {
	if len(peers) == 0 {
		return true
	}
	answers := make([]int, len(peers))
	var wg sync.WaitGroup
	for i, addr := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = reachesStore(ctx, addr)
		}()
	}
	wg.Wait()
	return !slices.Contains(answers, peerReaches) && slices.Contains(answers, peerLacksStore)
}

// What another bridge's GET /readyz says of its store.
const (
	peerSilent     = iota // no answer
	peerReaches           // 200, or 503 naming only other parts
	peerLacksStore        // 503 with a "store: …" line
)

// reachesStore asks the bridge at addr whether it reaches the store (GET
// /readyz, Handler).
func reachesStore(ctx context.Context, addr string) int {
	ctx, cancel := context.WithTimeout(ctx, askWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(addr, "/")+"/readyz", nil)
	if err != nil {
		return peerSilent
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return peerSilent
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return peerReaches
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "store:") {
			return peerLacksStore
		}
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		return peerReaches
	}
	return peerSilent
}
