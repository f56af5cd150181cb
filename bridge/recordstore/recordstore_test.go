package recordstore_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet/records"
	"github.com/boxwire/boxwire/bridge/recordstore"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/wire"
)

// TestStores: both stores keep every field of a record, list oldest
// first, report a missing record with ok false, and delete; the store
// over a Backend keeps them across a reopen.
func TestStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "boxwire.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	older := records.Thread{ID: "t_a", Created: now.Add(-time.Hour)}
	full := records.Thread{ID: "t_b", Box: "b1", Scope: wire.ScopeAssistant, Assistant: "x", Image: "img", Runtime: "runsc",
		Created: now, Suspended: &now, SuspendedFor: wire.ExitIdle, IdleTTL: time.Minute, Egress: []string{"pypi.org"},
		Policy: json.RawMessage(`{"rules":[]}`), MCP: json.RawMessage(`{"servers":[{"name":"docs","command":["docs-mcp"]}]}`), Owner: "alice"}
	for name, st := range map[string]records.Store{"mem": recordstore.NewMem(), "backend": recordstore.Over(db)} {
		for _, r := range []records.Thread{full, older} {
			if err := st.Put(ctx, r); err != nil {
				t.Fatalf("%s: put: %v", name, err)
			}
		}
		got, ok, err := st.Get(ctx, "t_b")
		if err != nil || !ok || !reflect.DeepEqual(normal(got), normal(full)) {
			t.Fatalf("%s: get: %+v %v %v, want %+v", name, got, ok, err, full)
		}
		if _, ok, err := st.Get(ctx, "t_none"); ok || err != nil {
			t.Fatalf("%s: a missing record: %v %v", name, ok, err)
		}
		list, err := st.List(ctx)
		if err != nil || len(list) != 2 || list[0].ID != "t_a" || list[1].ID != "t_b" {
			t.Fatalf("%s: list %+v %v", name, list, err)
		}
		if err := st.Delete(ctx, "t_a"); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := st.Get(ctx, "t_a"); ok {
			t.Fatalf("%s: deleted record still there", name)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got, ok, err := recordstore.Over(db).Get(ctx, "t_b"); err != nil || !ok || got.Owner != "alice" {
		t.Fatalf("after a reopen: %+v %v %v", got, ok, err)
	}
}

// normal drops the time zone and monotonic clock so stored and given
// times compare equal.
func normal(r records.Thread) records.Thread {
	r.Created = r.Created.UTC().Round(0)
	if r.Suspended != nil {
		s := r.Suspended.UTC().Round(0)
		r.Suspended = &s
	}
	return r
}
