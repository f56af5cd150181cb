package greet

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// folderWatch tells Wait when something is made in an agent folder: the
// agent's socket appears there once it listens, and Wait dials it then
// rather than at its next poll (every agentPollInterval, 10 ms late on
// average). It is inotify, read through the runtime's poller, so a
// waiting Wait holds no thread. A nil *folderWatch (inotify refused)
// waits the poll interval.
type folderWatch struct{ f *os.File }

// watchFolder watches dir for new names; nil when it cannot.
func watchFolder(dir string) *folderWatch {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		unix.Close(fd)
		return nil
	}
	return &folderWatch{f: os.NewFile(uintptr(fd), "inotify "+dir)}
}

// wait returns when a name was made in the folder since the last wait
// (made true), after d, or once ctx ends.
func (w *folderWatch) wait(ctx context.Context, d time.Duration) (made bool) {
	if w == nil {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
		return false
	}
	_ = w.f.SetReadDeadline(time.Now().Add(d))
	stop := context.AfterFunc(ctx, func() { _ = w.f.SetReadDeadline(time.Now()) })
	defer stop()
	var events [1024]byte // several inotify events; only that some came counts
	n, _ := w.f.Read(events[:])
	return n > 0
}

// close stops watching.
func (w *folderWatch) close() {
	if w != nil {
		_ = w.f.Close()
	}
}
