package storeopen_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/storeopen"
)

func TestOpenRefusesAnotherWhere(t *testing.T) {
	t.Parallel()
	_, err := storeopen.Open(context.Background(), "mysql://x", t.TempDir(), store.Options{})
	if err == nil || !strings.Contains(err.Error(), `want a postgres:// URL or "" for <data-dir>/boxwire.db`) {
		t.Fatalf("Open(mysql://): %v", err)
	}
}

func TestOpenMakesTheFile(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	st, err := storeopen.Open(context.Background(), "", dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, storeopen.File)); err != nil {
		t.Fatalf("no store file: %v", err)
	}
}

// Forget with no store file makes none; with one, it empties it.
func TestForget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := storeopen.Forget(context.Background(), "b1", dir, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, storeopen.File)); !os.IsNotExist(err) {
		t.Fatalf("Forget made a store file: %v", err)
	}
	st, err := storeopen.Open(context.Background(), "", dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := storeopen.Forget(context.Background(), "b1", dir, ""); err != nil {
		t.Fatalf("Forget on an empty store: %v", err)
	}
}
