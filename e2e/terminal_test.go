package e2e_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/boxwire/boxwire/bridge/wire"
)

// exitOf decodes a terminal_exit.
func exitOf(t *testing.T, env wire.Envelope) wire.TerminalExit {
	t.Helper()
	var x wire.TerminalExit
	if err := env.Decode(&x); err != nil {
		t.Fatalf("terminal_exit: %v", err)
	}
	return x
}

// TestTerminalResizeAndExit: a login shell sees a resize in `stty size`,
// and `exit 3` is reported as its status.
func TestTerminalResizeAndExit(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	c := e.dialTerm("", false)
	a := c.open(nil, 80, 24)
	if a.Cols != 80 || a.Rows != 24 {
		t.Errorf("opened %dx%d, want 80x24", a.Cols, a.Rows)
	}
	c.resize(a.Session, 101, 33)
	c.input(a.Session, "stty size\r")
	c.expect(a.Session, "33 101")
	c.input(a.Session, "exit 3\r")
	if x := exitOf(t, c.awaitMsg(wire.TypeTerminalExit)); x.Session != a.Session || x.ExitCode != 3 {
		t.Errorf("exit = %+v, want %s status 3", x, a.Session)
	}
}

// TestTerminalFullScreenAttach: a curses program's screen reaches a client
// that attaches later as a rendering that puts the text where the program
// drew it, on the alternate screen; top's batch output arrives too.
func TestTerminalFullScreenAttach(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	a := e.dialTerm("", false)
	script := `import curses, time
def main(s):
    s.addstr(5, 10, "BOXWIRE-CURSES")
    s.addstr(20, 0, "bottom line")
    s.refresh()
    time.sleep(600)
curses.wrapper(main)`
	open := a.open([]string{"python3", "-c", script}, 80, 24)
	a.expect(open.Session, "bottom line")

	b := e.dialTerm(a.conn.Thread(), false)
	att := b.attach(open.Session)
	emu := vt.NewEmulator(int(att.Cols), int(att.Rows))
	defer emu.Close()
	if _, err := emu.Write([]byte(att.Screen)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(emu.String(), "\n")
	if len(lines) < 21 || !strings.HasPrefix(lines[5], strings.Repeat(" ", 10)+"BOXWIRE-CURSES") || !strings.HasPrefix(lines[20], "bottom line") {
		t.Errorf("attach rendering:\n%s", emu.String())
	}
	if !emu.IsAltScreen() {
		t.Error("attach rendering is not on the alternate screen")
	}
	if strings.Contains(att.Screen, "\x1b[6n") || strings.Contains(att.Screen, "\x1b[c") {
		t.Errorf("screen carries terminal queries: %q", att.Screen)
	}

	top := a.open([]string{"top", "-b", "-n1"}, 100, 30)
	a.expect(top.Session, "PID")
	if x := exitOf(t, a.awaitMsg(wire.TypeTerminalExit)); x.Session != top.Session || x.ExitCode != 0 {
		t.Errorf("top exit = %+v", x)
	}
}

// TestTerminalShareDetachReattach: two clients see the same output; a
// client that detached and reattaches gets the screen, then live output;
// closing a client leaves the session running.
func TestTerminalShareDetachReattach(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	a := e.dialTerm("", false)
	open := a.open([]string{"bash", "--norc", "-i"}, 80, 24)
	sid := open.Session
	b := e.dialTerm(a.conn.Thread(), false)
	b.attach(sid)

	a.input(sid, "echo shared-$((6*7))\r")
	a.expect(sid, "shared-42")
	b.expect(sid, "shared-42")

	b.detach(sid)
	a.input(sid, "echo while-away-$((1+1))\r")
	a.expect(sid, "while-away-2")
	att := b.attach(sid)
	if !strings.Contains(att.Screen, "shared-42") || !strings.Contains(att.Screen, "while-away-2") {
		t.Errorf("reattach screen lacks the output:\n%q", att.Screen)
	}
	b.input(sid, "echo live-$((3*3))\r")
	b.expect(sid, "live-9")
	a.expect(sid, "live-9")

	a.conn.Close() // the session outlives its opener
	waitFor(t, "the bridge to see the opener leave", func() bool { return e.threadInfo(b.conn.Thread()).Clients == 1 })
	var info *wire.TerminalInfo
	for _, s := range b.list() {
		if s.Session == sid {
			info = &s
		}
	}
	if info == nil || info.Exited {
		t.Fatalf("after the opener closed, session %s is %+v", sid, info)
	}
	b.input(sid, "echo still-$((5+5))\r")
	b.expect(sid, "still-10")
}

// TestTerminalBulkOutput: 64 MiB of output arrives complete.
func TestTerminalBulkOutput(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	s := e.dial("")
	n, took := streamTerminal(t, e, s, "head -c 64M /dev/zero")
	if n != 64<<20 {
		t.Errorf("got %d bytes, want %d", n, 64<<20)
	}
	t.Logf("64 MiB through a terminal in %v (%.1f MiB/s)", took, 64/took.Seconds())
}

// TestTerminalClientBinary: the real `client shell` on a PTY: a typed
// command's output shows, Ctrl-] q detaches and the local terminal's
// settings are as before.
func TestTerminalClientBinary(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	before := freshTermios(t)
	p := e.startPTY("--url", e.bridge.url, "shell", "--", "bash", "--norc", "-i")
	p.send("echo typed-$((2+3))\r")
	p.expect("typed-5", termTimeout)
	raw, err := unix.IoctlGetTermios(int(p.tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Lflag&unix.ECHO != 0 || raw.Lflag&unix.ICANON != 0 {
		t.Errorf("the client's terminal is not in raw mode: lflag %#x", raw.Lflag)
	}
	p.send("\x1dq")
	p.expect("detached from", termTimeout)
	if code := p.wait(termTimeout); code != 0 {
		t.Errorf("client exit code %d after detach", code)
	}
	after, err := unix.IoctlGetTermios(int(p.tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := termiosString(after), termiosString(before); got != want {
		t.Errorf("terminal settings after the client:\n%s\nbefore:\n%s", got, want)
	}
}

// freshTermios is the settings of a new pseudo-terminal: the client's
// terminal before it ran.
func freshTermios(t *testing.T) *unix.Termios {
	t.Helper()
	ptm, pts, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptm.Close()
	defer pts.Close()
	tio, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return tio
}

func termiosString(t *unix.Termios) string {
	return fmt.Sprintf("iflag %#x oflag %#x cflag %#x lflag %#x cc %v", t.Iflag, t.Oflag, t.Cflag, t.Lflag, t.Cc)
}

// /shell inside the chat: the shell gets the keys while attached, and after
// the detach key the chat's line editor gets every key again — none is
// swallowed by a read the shell left behind.
func TestTerminalFromChat(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	p := e.startPTYEnv(e.colorEnv(t.TempDir()), "--url", e.bridge.url) // a terminal with the line editor
	p.expect("thread t_", termTimeout)
	p.expect("› ", termTimeout)
	p.send("/shell\r")
	p.expect("boxwire@", termTimeout) // the shell's prompt
	p.send("echo in-shell-$((2+3))\r")
	p.expect("in-shell-5", termTimeout)
	p.send("\x1dq")
	p.expect("detached from", termTimeout)
	p.expect("› ", termTimeout) // the chat's prompt is back
	p.send("hello from the chat\r")
	p.expect("now says hello", termTimeout) // helloScript's answer to a "hello" turn
}
