package shell

import (
	"fmt"
	"os"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// openPTY opens a PTY pair sized cols x rows. The master is returned in
// non-blocking mode and registered with the runtime poller, so read deadlines
// work and Close interrupts a blocked Read. The tty (slave) is blocking, as
// the child expects.
func openPTY(cols, rows uint16) (master, tty *os.File, err error) {
	m, t, err := pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	if err := pty.Setsize(t, &pty.Winsize{Cols: cols, Rows: rows}); err != nil {
		_ = m.Close()
		_ = t.Close()
		return nil, nil, fmt.Errorf("set pty size: %w", err)
	}
	// pty.Open calls Fd on the master, which puts it in blocking mode for
	// good. Re-wrap a non-blocking duplicate so the poller owns it.
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	name := m.Name()
	_ = m.Close()
	if err != nil {
		_ = t.Close()
		return nil, nil, fmt.Errorf("dup pty master: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		_ = t.Close()
		return nil, nil, fmt.Errorf("set pty master non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), name), t, nil
}

// setSize sets the window size on the master without calling Fd (which
// would switch the file back to blocking mode).
func setSize(master *os.File, cols, rows uint16) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ioctlErr error
	err = rc.Control(func(fd uintptr) {
		ioctlErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
	})
	if err != nil {
		return err
	}
	return ioctlErr
}
