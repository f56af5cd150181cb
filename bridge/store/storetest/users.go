package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/store"
)

// Users and keys: put replaces, lists are by name and id, a user's
// deletion takes their keys, missing ones are auth.ErrNotFound.
func testUsers(t *testing.T, cfg Config) {
	ctx := context.Background()
	o := cfg.New(t)
	db := open(t, o, store.Options{})
	s := db.Accounts()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if _, err := s.User(ctx, "ann"); !errors.Is(err, auth.ErrNotFound) {
		t.Fatalf("missing user: %v, want ErrNotFound", err)
	}
	if _, err := s.Key(ctx, "k1"); !errors.Is(err, auth.ErrNotFound) {
		t.Fatalf("missing key: %v, want ErrNotFound", err)
	}
	for _, u := range []auth.User{
		{Name: "bob", Created: now},
		{Name: "ann", Created: now, Admin: true},
		{Name: "bob", Created: now, Limits: auth.Limits{Sandboxes: 2, TokensPerDay: 1000}},
	} {
		if err := s.PutUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	exp := now.Add(time.Hour)
	for _, k := range []auth.Key{
		{ID: "k2", User: "bob", Hash: "h2", Created: now},
		{ID: "k1", User: "ann", Name: "laptop", Hash: "h1", Created: now, Expires: &exp},
		{ID: "k3", User: "bob", Hash: "h3", Created: now},
	} {
		if err := s.PutKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	k1, err := s.Key(ctx, "k1")
	if err != nil || k1.User != "ann" || k1.Name != "laptop" || k1.Expires == nil || !k1.Expires.Equal(exp) {
		t.Fatalf("Key k1 = %+v, %v", k1, err)
	}
	revoked := now.Add(time.Minute)
	k1.Revoked = &revoked
	if err := s.PutKey(ctx, k1); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, o, store.Options{}).Accounts()
	if k, err := s.Key(ctx, "k1"); err != nil || k.Revoked == nil || k.Active(now.Add(2*time.Minute)) {
		t.Fatalf("revoked key after reopen = %+v, %v", k, err)
	}
	bob, err := s.User(ctx, "bob")
	if err != nil || bob.Limits.Sandboxes != 2 || bob.Limits.TokensPerDay != 1000 || !bob.Created.Equal(now) {
		t.Fatalf("User bob = %+v, %v", bob, err)
	}
	users, err := s.Users(ctx)
	if err != nil || names(users) != "[ann bob]" || !users[0].Admin {
		t.Fatalf("Users = %+v, %v", users, err)
	}
	for user, want := range map[string]string{"": "[k1 k2 k3]", "bob": "[k2 k3]", "ann": "[k1]", "zed": "[]"} {
		if keys, err := s.Keys(ctx, user); err != nil || keyIDs(keys) != want {
			t.Errorf("Keys(%q) = %s, %v; want %s", user, keyIDs(keys), err, want)
		}
	}
	if err := s.DeleteUser(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.User(ctx, "bob"); !errors.Is(err, auth.ErrNotFound) {
		t.Fatalf("deleted user: %v", err)
	}
	if _, err := s.Key(ctx, "k2"); !errors.Is(err, auth.ErrNotFound) {
		t.Fatalf("deleted user's key: %v", err)
	}
	if keys, err := s.Keys(ctx, ""); err != nil || keyIDs(keys) != "[k1]" {
		t.Fatalf("Keys after delete = %s, %v", keyIDs(keys), err)
	}
}

// The audit log: oldest first, filtered, the newest Limit.
func testAudit(t *testing.T, cfg Config) {
	ctx := context.Background()
	s := open(t, cfg.New(t), store.Options{}).Accounts()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var all []auth.AuditEntry
	for i := range 6 {
		e := auth.AuditEntry{Time: base.Add(time.Duration(i) * time.Second), User: []string{"ann", "bob"}[i%2],
			Action: []string{"thread.create", "thread.attach", "keys.create"}[i%3], Thread: fmt.Sprintf("t%d", i%2),
			Detail: fmt.Sprint("n", i), Remote: "127.0.0.1"}
		if i == 5 {
			e.KeyID = "k1"
		}
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
		all = append(all, e)
	}
	for _, tc := range []struct {
		name string
		f    auth.AuditFilter
		want string
	}{
		{"all", auth.AuditFilter{}, "[n0 n1 n2 n3 n4 n5]"},
		{"user", auth.AuditFilter{User: "bob"}, "[n1 n3 n5]"},
		{"action", auth.AuditFilter{Action: "thread.create"}, "[n0 n3]"},
		{"thread", auth.AuditFilter{Thread: "t0"}, "[n0 n2 n4]"},
		{"since", auth.AuditFilter{Since: base.Add(4 * time.Second)}, "[n4 n5]"},
		{"limit", auth.AuditFilter{Limit: 2}, "[n4 n5]"},
		{"user and limit", auth.AuditFilter{User: "ann", Limit: 2}, "[n2 n4]"},
		{"none", auth.AuditFilter{User: "zed"}, "[]"},
	} {
		got, err := s.Audit(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		var d []string
		for _, e := range got {
			d = append(d, e.Detail)
		}
		if fmt.Sprint(d) != tc.want {
			t.Errorf("%s: Audit = %v; want %s", tc.name, d, tc.want)
		}
	}
	got, err := s.Audit(ctx, auth.AuditFilter{Limit: 1})
	if err != nil || len(got) != 1 || !got[0].Time.Equal(all[5].Time) || got[0].KeyID != "k1" || got[0].Remote != "127.0.0.1" {
		t.Fatalf("newest entry = %+v, %v; want %+v", got, err, all[5])
	}
}

func names(us []auth.User) string {
	var out []string
	for _, u := range us {
		out = append(out, u.Name)
	}
	return fmt.Sprint(out)
}

func keyIDs(ks []auth.Key) string {
	out := []string{}
	for _, k := range ks {
		out = append(out, k.ID)
	}
	return fmt.Sprint(out)
}
