package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// One holder at a time: another's acquire and renew are refused while the
// lease lasts, renewals keep the epoch, a release or an expiry lets the
// next holder in with the next epoch, and the lease goes with its thread.
func testLeases(t *testing.T, cfg Config) {
	ctx := context.Background()
	a, b := twoStores(t, cfg)
	const long = time.Minute
	la, err := a.AcquireLease(ctx, "t1", "bridge-a", long)
	if err != nil || la.Holder != "bridge-a" || la.Thread != "t1" || la.Epoch == 0 || time.Until(la.Expires) < long/2 {
		t.Fatalf("first acquire = %+v, %v", la, err)
	}
	if l, err := b.AcquireLease(ctx, "t1", "bridge-b", long); !errors.Is(err, store.ErrLeaseHeld) || l.Holder != "bridge-a" || l.Epoch != la.Epoch {
		t.Fatalf("acquire of a held lease = %+v, %v; want ErrLeaseHeld naming bridge-a", l, err)
	}
	if _, err := b.RenewLease(ctx, "t1", "bridge-b", long); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("renew by a non-holder: %v, want ErrLeaseLost", err)
	}
	for _, renew := range []func() (store.Lease, error){
		func() (store.Lease, error) { return a.RenewLease(ctx, "t1", "bridge-a", long) },
		func() (store.Lease, error) { return b.AcquireLease(ctx, "t1", "bridge-a", long) }, // acquire by the holder renews
	} {
		if l, err := renew(); err != nil || l.Epoch != la.Epoch || l.Holder != "bridge-a" {
			t.Fatalf("renewal = %+v, %v; want epoch %d", l, err, la.Epoch)
		}
	}
	if _, err := a.AcquireLease(ctx, "t2", "bridge-b", long); err != nil {
		t.Fatal(err)
	}
	if ls, err := b.Leases(ctx); err != nil || leaseList(ls) != "[t1:bridge-a t2:bridge-b]" {
		t.Fatalf("Leases = %s, %v", leaseList(ls), err)
	}
	if err := b.ReleaseLease(ctx, "t1", "bridge-b"); err != nil { // not b's: nothing
		t.Fatal(err)
	}
	if err := a.ReleaseLease(ctx, "t1", "bridge-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RenewLease(ctx, "t1", "bridge-a", long); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("renew after release: %v, want ErrLeaseLost", err)
	}
	lb, err := b.AcquireLease(ctx, "t1", "bridge-b", 300*time.Millisecond)
	if err != nil || lb.Epoch != la.Epoch+1 {
		t.Fatalf("acquire after release = %+v, %v; want epoch %d", lb, err, la.Epoch+1)
	}
	// b stops renewing: once its lease expires a takes it, with the
	// next epoch, and b's renewal is refused.
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := a.AcquireLease(ctx, "t1", "bridge-a", long)
		if err == nil {
			if l.Epoch != lb.Epoch+1 {
				t.Fatalf("acquire after expiry: epoch %d, want %d", l.Epoch, lb.Epoch+1)
			}
			break
		}
		if !errors.Is(err, store.ErrLeaseHeld) || time.Now().After(deadline) {
			t.Fatalf("acquire after expiry: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := b.RenewLease(ctx, "t1", "bridge-b", long); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("renew of an expired, retaken lease: %v, want ErrLeaseLost", err)
	}
	if err := a.DeleteThread("t2"); err != nil {
		t.Fatal(err)
	}
	if ls, err := b.Leases(ctx); err != nil || leaseList(ls) != "[t1:bridge-a]" {
		t.Fatalf("Leases after deleting t2 = %s, %v", leaseList(ls), err)
	}
}

// Holders racing for the same threads — in several stores (bridges) when
// the backend is shared — never both win: per thread exactly one acquire
// succeeds, and every refusal names the winner.
func testLeaseRace(t *testing.T, cfg Config) {
	ctx := context.Background()
	o := cfg.New(t)
	stores := []store.Backend{open(t, o, store.Options{})}
	if cfg.Shared {
		stores = append(stores, open(t, o, store.Options{}))
	}
	const threads, holders = 20, 6
	type res struct {
		thread, holder string
		l              store.Lease
		err            error
	}
	results := make(chan res, threads*holders)
	var wg sync.WaitGroup
	for h := range holders {
		s := stores[h%len(stores)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range threads {
				th, holder := fmt.Sprintf("t%02d", n), fmt.Sprintf("bridge-%d", h)
				l, err := s.AcquireLease(ctx, th, holder, time.Minute)
				results <- res{th, holder, l, err}
			}
		}()
	}
	wg.Wait()
	close(results)
	winner := map[string]string{}
	var refused []res
	for r := range results {
		switch {
		case r.err == nil:
			if w, ok := winner[r.thread]; ok {
				t.Fatalf("%s: both %s and %s acquired the lease", r.thread, w, r.holder)
			}
			winner[r.thread] = r.holder
		case errors.Is(r.err, store.ErrLeaseHeld):
			refused = append(refused, r)
		default:
			t.Fatalf("%s by %s: %v", r.thread, r.holder, r.err)
		}
	}
	if len(winner) != threads || len(refused) != threads*(holders-1) {
		t.Fatalf("%d threads won, %d refusals; want %d and %d", len(winner), len(refused), threads, threads*(holders-1))
	}
	for _, r := range refused {
		if r.l.Holder != winner[r.thread] {
			t.Fatalf("%s refused to %s naming %s; the winner is %s", r.thread, r.holder, r.l.Holder, winner[r.thread])
		}
	}
}

// Approvals: pending ones listed per thread, the first decision wins even
// when stores race, a decided one is no longer pending, and they go with
// their thread or DeleteApproval.
func testApprovals(t *testing.T, cfg Config) {
	ctx := context.Background()
	a, b := twoStores(t, cfg)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	mk := func(id string, at int, threads ...string) store.Approval {
		return store.Approval{ID: id, Threads: threads, Holder: "bridge-a", Created: base.Add(time.Duration(at) * time.Second),
			Request: wire.ApprovalRequest{ApprovalID: id, ApprovalAction: wire.ApprovalAction{Kind: wire.ApprovalEgress, Host: "example.com"},
				Rule: "ask", Expires: base.Add(time.Minute).Format(time.RFC3339)}}
	}
	for _, ap := range []store.Approval{mk("ap_2", 2, "t1"), mk("ap_1", 1, "t1", "t2"), mk("ap_3", 3, "t2")} {
		if err := a.PutApproval(ctx, ap); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := b.Approvals(ctx, "t1"); err != nil || approvalIDs(got) != "[ap_1 ap_2]" {
		t.Fatalf("Approvals(t1) = %s, %v", approvalIDs(got), err)
	}
	got, ok, err := b.Approval(ctx, "ap_1")
	if err != nil || !ok || got.Request.Host != "example.com" || !got.Created.Equal(base.Add(time.Second)) || fmt.Sprint(got.Threads) != "[t1 t2]" {
		t.Fatalf("Approval(ap_1) = %+v, %v, %v", got, ok, err)
	}
	if _, ok, err := b.Approval(ctx, "ap_none"); ok || err != nil {
		t.Fatalf("Approval of a missing id: %v, %v", ok, err)
	}
	if _, _, err := b.DecideApproval(ctx, "ap_none", wire.ApprovalDecision{Verdict: wire.VerdictApproved}); !errors.Is(err, store.ErrNoApproval) {
		t.Fatalf("DecideApproval of a missing id: %v, want ErrNoApproval", err)
	}

	// Two deciders race on ap_1: one wins, both see its decision.
	type res struct {
		a   store.Approval
		won bool
		err error
	}
	results := make(chan res, 2)
	for i, s := range []store.Backend{a, b} {
		go func() {
			d := wire.ApprovalDecision{ApprovalID: "ap_1", Verdict: []string{wire.VerdictApproved, wire.VerdictDenied}[i], By: fmt.Sprint("c", i)}
			ap, won, err := s.DecideApproval(ctx, "ap_1", d)
			results <- res{ap, won, err}
		}()
	}
	r1, r2 := receive(t, "decide", results), receive(t, "decide", results)
	if r1.err != nil || r2.err != nil || r1.won == r2.won || r1.a.Decision == nil || r2.a.Decision == nil || !reflect.DeepEqual(r1.a.Decision, r2.a.Decision) {
		t.Fatalf("racing decisions: %+v / %+v", r1, r2)
	}
	if ap, ok, err := a.Approval(ctx, "ap_1"); err != nil || !ok || ap.Decision == nil || !reflect.DeepEqual(ap.Decision, r1.a.Decision) {
		t.Fatalf("decided approval = %+v, %v, %v", ap, ok, err)
	}
	for th, want := range map[string]string{"t1": "[ap_2]", "t2": "[ap_3]"} {
		if got, err := a.Approvals(ctx, th); err != nil || approvalIDs(got) != want {
			t.Fatalf("Approvals(%s) after a decision = %s, %v; want %s", th, approvalIDs(got), err, want)
		}
	}
	if err := b.DeleteApproval(ctx, "ap_3"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteApproval(ctx, "ap_3"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if err := a.DeleteThread("t1"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ap_1", "ap_2", "ap_3"} {
		if _, ok, err := b.Approval(ctx, id); ok || err != nil {
			t.Errorf("%s after its thread's deletion: %v, %v", id, ok, err)
		}
	}
}

func leaseList(ls []store.Lease) string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Thread+":"+l.Holder)
	}
	return fmt.Sprint(out)
}

func approvalIDs(as []store.Approval) string {
	var out []string
	for _, a := range as {
		out = append(out, a.ID)
	}
	return fmt.Sprint(out)
}

// twoStores opens two stores on one new place when the backend is shared
// (two bridges), else returns one store twice.
func twoStores(t *testing.T, cfg Config) (a, b store.Backend) {
	o := cfg.New(t)
	a = open(t, o, store.Options{})
	if !cfg.Shared {
		return a, a
	}
	return a, open(t, o, store.Options{})
}

// Bridges announced on one store are listed by the others, by id; a new
// announcement replaces the old, an empty address forgets the bridge.
func testBridges(t *testing.T, cfg Config) {
	ctx := context.Background()
	a, b := twoStores(t, cfg)
	for _, br := range []store.Bridge{
		{ID: "b2", Address: "http://127.0.0.1:2"},
		{ID: "b1", Address: "http://127.0.0.1:1"},
		{ID: "b2", Address: "http://127.0.0.1:22"},
		{ID: "b3", Address: "http://127.0.0.1:3"},
		{ID: "b3"},
	} {
		if err := a.PutBridge(ctx, br); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.Bridges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, br := range got {
		list = append(list, br.ID+"="+br.Address)
		if br.Updated.IsZero() {
			t.Errorf("bridge %s has no time", br.ID)
		}
	}
	if fmt.Sprint(list) != "[b1=http://127.0.0.1:1 b2=http://127.0.0.1:22]" {
		t.Fatalf("Bridges = %v", list)
	}
}

// Writes are fenced by the lease on a shared store: once another holder
// took a thread's lease (the first's ran out), the first store's writes
// of that thread — events, cursor — are dropped with ErrLeaseLost and the
// new holder's log is left alone; once the first takes the lease back,
// its writes go in again. One store alone has nothing to fence.
func testLeaseFencesWrites(t *testing.T, cfg Config) {
	if !cfg.Shared {
		t.Skip("one bridge has the store: nothing to fence")
	}
	ctx := context.Background()
	o := cfg.New(t)
	a := open(t, o, store.Options{Holder: "bridge-a"})
	b := open(t, o, store.Options{Holder: "bridge-b"})
	if err := a.PutThread(store.Thread{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AcquireLease(ctx, "t1", "bridge-a", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	appendAll(t, a, "t1", 1, 3)
	a.SaveCursor("t1", store.Cursor{Instance: "agent-1", Seq: 3})
	deadline := time.Now().Add(30 * time.Second)
	for { // bridge-a's lease runs out and bridge-b takes the thread
		_, err := b.AcquireLease(ctx, "t1", "bridge-b", time.Minute)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrLeaseHeld) || time.Now().After(deadline) {
			t.Fatalf("bridge-b takes the lease: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	late := make(chan error, 1)
	a.Append("t1", ev(4, "late"), func(err error) { late <- err })
	a.SaveCursor("t1", store.Cursor{Instance: "agent-1", Seq: 4})
	if err := receive(t, "the late append's answer", late); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("bridge-a's append after the takeover: %v, want ErrLeaseLost", err)
	}
	a.Flush()
	if c, _, err := b.Cursor("t1"); err != nil || c.Seq != 3 {
		t.Fatalf("cursor after the takeover = %+v, %v; want bridge-a's last before it (seq 3)", c, err)
	}
	appendAll(t, b, "t1", 4, 1)
	if evs, err := b.Events("t1", 3, 10); err != nil || len(evs) != 1 || textOf(t, evs[0]) != "x" {
		t.Fatalf("event 4 = %v, %v; want bridge-b's alone", evs, err)
	}
	if err := b.ReleaseLease(ctx, "t1", "bridge-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AcquireLease(ctx, "t1", "bridge-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	appendAll(t, a, "t1", 5, 1)
	if last, err := b.LastSeq("t1"); err != nil || last != 5 {
		t.Fatalf("LastSeq after bridge-a took the thread back = %d, %v; want 5", last, err)
	}
}
