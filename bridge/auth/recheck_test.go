package auth_test

import (
	"context"
	"testing"

	"github.com/boxwire/boxwire/bridge/auth"
)

// TestRecheckEndsWhatAnotherBridgeRevoked: two authenticators on one
// store, as two bridges on one database. A key revoked through one, and
// a user deleted through it, end the other's watches only at its
// Recheck; a key still valid keeps its watch, and a second Recheck finds
// nothing more.
func TestRecheckEndsWhatAnotherBridgeRevoked(t *testing.T) {
	a, st, c := newAuth(t, nil)
	b, err := auth.New(auth.Config{AdminToken: adminToken, Store: st, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, u := range []string{"alice", "bob"} {
		if _, err := a.AddUser(ctx, u, false, auth.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	_, revoked, _ := a.CreateKey(ctx, "alice", "", 0)
	_, kept, _ := a.CreateKey(ctx, "alice", "", 0)
	_, bobs, _ := a.CreateKey(ctx, "bob", "", 0)
	watch := func(user, id string) <-chan struct{} {
		ch, stop := a.Watch(auth.Principal{User: user, KeyID: id})
		t.Cleanup(stop)
		return ch
	}
	gone, stays, bobGone := watch("alice", revoked.ID), watch("alice", kept.ID), watch("bob", bobs.ID)
	if _, err := b.RevokeKey(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteUser(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan struct{}{gone, bobGone} {
		select {
		case <-ch:
			t.Fatal("a watch ended before the Recheck: this test checks nothing")
		default:
		}
	}
	if n, err := a.Recheck(ctx); n != 2 || err != nil {
		t.Fatalf("Recheck = %d, %v; want 2 keys ended", n, err)
	}
	for name, ch := range map[string]<-chan struct{}{"revoked key": gone, "deleted user's key": bobGone} {
		select {
		case <-ch:
		default:
			t.Errorf("the watch of the %s did not end", name)
		}
	}
	select {
	case <-stays:
		t.Fatal("the watch of a valid key ended")
	default:
	}
	if n, err := a.Recheck(ctx); n != 0 || err != nil {
		t.Fatalf("second Recheck = %d, %v; want 0", n, err)
	}
}
