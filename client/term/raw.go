package term

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Size returns f's window size in columns and rows.
func Size(f *os.File) (cols, rows uint16, err error) {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0, fmt.Errorf("window size: %w", err)
	}
	return ws.Col, ws.Row, nil
}

// MakeRaw puts terminal f in raw mode (as cfmakeraw does: no echo, no line
// editing, no signals from keys, no output processing) and returns a
// function that restores the settings it found. The function is
// idempotent and safe for concurrent use; call it on every exit path.
func MakeRaw(f *os.File) (restore func() error, err error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("raw mode: %w", err)
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN] = 1
	raw.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, fmt.Errorf("raw mode: %w", err)
	}
	var once sync.Once
	var rerr error
	return func() error {
		once.Do(func() {
			if err := unix.IoctlSetTermios(fd, unix.TCSETS, old); err != nil {
				rerr = fmt.Errorf("restore terminal: %w", err)
			}
		})
		return rerr
	}, nil
}
