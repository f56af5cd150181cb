package server

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/store"
)

// A bridge cut off from the store (docs/store.md, "Fail-over") cannot
// renew its threads' leases; once they have run out by its own clock
// (lease.Book.Overdue) another bridge may have taken them over and
// reconnected to their agents. It then stops relaying them — their
// clients closed with closeCutOff, their agent connections ended, their
// sandboxes left running (letGo) — unless the store is down for every
// bridge: when the other bridges it knows say so themselves (their
// /readyz names the store), nobody can take a lease meanwhile, and each
// bridge keeps its threads until the store is back (as after a database
// restart). With no other bridge known it keeps them too.

// closeCutOff is the close text of a client whose bridge lost the store
// and, with it, the lease of the client's thread (close code 1001: it
// reconnects, to any bridge).
const closeCutOff = "this bridge cannot reach the store and no longer holds the thread's lease: reconnect"

// peerAskWait bounds asking another bridge whether it reaches the store:
// longer than its own check of the store takes (readyTimeout).
const peerAskWait = readyTimeout + time.Second

// cutOff stops relaying the threads ids, whose leases ran out while the
// store did not answer, unless the other bridges say the store is down
// for them too (storeDownEverywhere). Only on a store several bridges
// share: the bbolt store's leases are in memory and always renewed.
func (s *Server) cutOff(ctx context.Context, ids []string) {
	if _, shared := s.db.(store.Listener); !shared {
		return
	}
	if s.storeDownEverywhere(ctx) {
		s.log.Info("leases ran out while the store is down for every bridge: still relaying the threads", "threads", len(ids))
		return
	}
	s.log.Error("cut off from the store past the leases' expiry: another bridge may relay the threads now", "threads", len(ids))
	for _, id := range ids {
		s.letGo(id, closeCutOff)
	}
}

// storeDownEverywhere reports whether the other bridges this one knew of
// at its last renewal agree that the store is down: none reaches it, and
// at least one says it does not. True when no other bridge is known
// (nobody could take a lease), false when none answers (they may reach
// the store, and this bridge not them).
func (s *Server) storeDownEverywhere(ctx context.Context) bool {
	peers := s.leases.Peers()
	if len(peers) == 0 {
		return true
	}
	answers := make([]int, len(peers))
	var wg sync.WaitGroup
	for i, addr := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = peerReachesStore(ctx, addr)
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

// peerReachesStore asks the bridge at addr (an announced address)
// whether it reaches the store (GET /readyz, serveReady).
func peerReachesStore(ctx context.Context, addr string) int {
	ctx, cancel := context.WithTimeout(ctx, peerAskWait)
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
