package store_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/boxwire/boxwire/bridge/store"
)

// A thread's agent cursor is committed behind the events appended before
// it, survives a reopen, and goes with the thread.
func TestAgentCursor(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "boxwire.db")
	s := open(t, path, store.Options{})
	if _, ok, err := s.Cursor("t1"); ok || err != nil {
		t.Fatalf("cursor of a new thread: ok %v, err %v", ok, err)
	}
	want := store.Cursor{Instance: "a3f0", Seq: 7, Held: json.RawMessage(`[{"call_id":"c1","text":"tok"}]`)}
	for seq := uint64(1); seq <= 3; seq++ {
		s.Append("t1", ev(seq, "x"), nil)
		s.SaveCursor("t1", store.Cursor{Instance: "a3f0", Seq: seq + 4})
	}
	s.SaveCursor("t1", want)
	s.Flush()
	if got, ok, err := s.Cursor("t1"); !ok || err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Cursor = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, store.Options{})
	if got, ok, err := s.Cursor("t1"); !ok || err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopen Cursor = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	if last, err := s.LastSeq("t1"); err != nil || last != 3 {
		t.Fatalf("LastSeq = %d, %v", last, err)
	}
	if err := s.DeleteThread("t1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Cursor("t1"); ok || err != nil {
		t.Fatalf("cursor after delete: ok %v, err %v", ok, err)
	}
	s.Close()
	s.SaveCursor("t1", want) // after Close: nothing, no panic
}
