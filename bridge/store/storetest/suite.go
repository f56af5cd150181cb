package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Open opens a store on one place; called again (after Close, or while
// open when Config.Shared), it opens the same place again.
type Open func(opt store.Options) (store.Backend, error)

// Config says how to make stores for Run.
type Config struct {
	// New makes an empty place (a file, a database) that lives as long as
	// t and returns how to open stores there.
	New func(t *testing.T) Open
	// Shared is true when several stores may be open on one place at once
	// (several bridges on one database); then racing writers are separate
	// stores, else goroutines of one.
	Shared bool
}

// Run runs every case of the suite as a parallel subtest of t.
func Run(t *testing.T, cfg Config) {
	cases := []struct {
		name string
		run  func(*testing.T, Config)
	}{
		{"EventsSurviveReopen", testEventsSurviveReopen},
		{"ThreadRecords", testThreadRecords},
		{"AppendReplacesSameSeq", testAppendReplacesSameSeq},
		{"AppendNextNumbers", testAppendNextNumbers},
		{"RacingWritersGetConsecutiveSeqs", testRacingWriters},
		{"AppendAfterCloseFails", testAppendAfterCloseFails},
		{"SyncInterval", testSyncInterval},
		{"Ping", testPing},
		{"AppendLatency", testAppendLatency},
		{"Prune", testPrune},
		{"PruneKeepsLeased", testPruneKeepsLeased},
		{"AgentCursor", testAgentCursor},
		{"AppendGroup", testAppendGroup},
		{"Inflight", testInflight},
		{"WritesAfterDeleteDropped", testWritesAfterDeleteDropped},
		{"Users", testUsers},
		{"Audit", testAudit},
		{"Leases", testLeases},
		{"LeaseRace", testLeaseRace},
		{"LeaseFencesWrites", testLeaseFencesWrites},
		{"Approvals", testApprovals},
		{"Bridges", testBridges},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, cfg)
		})
	}
}

// open opens a store there and closes it when the test ends.
func open(t *testing.T, o Open, opt store.Options) store.Backend {
	t.Helper()
	s, err := o(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ev(seq uint64, text string) wire.Envelope {
	e := wire.MustNew(wire.TypeAssistantDelta, "t1", "m1", wire.Text{Text: text})
	e.Seq = seq
	return e
}

func textOf(t *testing.T, e wire.Envelope) string {
	t.Helper()
	var x wire.Text
	if err := e.Decode(&x); err != nil {
		t.Fatalf("event %d: %v", e.Seq, err)
	}
	return x.Text
}

// appendAll appends n events from seq first and waits for their commit.
func appendAll(t *testing.T, s store.Backend, thread string, first, n uint64) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := first; i < first+n; i++ {
		wg.Add(1)
		s.Append(thread, ev(i, "x"), func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			wg.Done()
		})
	}
	if !waitGroup(&wg, 30*time.Second) {
		t.Fatalf("append of %d events not committed within 30s", n)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// waitGroup waits at most d for wg and reports whether it finished.
func waitGroup(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func receive[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: nothing within 30s", what)
	}
	var zero T
	return zero
}
