package greet

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// A socket made in the watched folder (as the agent's appears when it
// listens) ends the wait as made; the poll interval given is a minute, so
// without the watch the test would wait it out and see made false.
func TestFolderWatchSeesTheSocket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := watchFolder(dir)
	if w == nil {
		t.Fatal("inotify refused")
	}
	defer w.close()
	go func() {
		time.Sleep(10 * time.Millisecond)
		ln, err := net.Listen("unix", filepath.Join(dir, AgentSocket))
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { ln.Close() })
	}()
	if !w.wait(context.Background(), time.Minute) {
		t.Fatal("the wait ended without seeing the socket made")
	}
}

// A wait ends when its context does, whatever the pause; made is false.
func TestFolderWatchEndsWithItsContext(t *testing.T) {
	t.Parallel()
	w := watchFolder(t.TempDir())
	if w == nil {
		t.Fatal("inotify refused")
	}
	defer w.close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	if w.wait(ctx, time.Hour) {
		t.Fatal("made is true with nothing made")
	}
	if ctx.Err() == nil {
		t.Fatal("the wait ended before its context")
	}
}
