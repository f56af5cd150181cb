package wire

import (
	"errors"
	"fmt"
)

// Terminal control messages (docs/terminal.md). None of them is an event:
// they carry no Seq and are not kept in a thread's log. Terminal bytes do not
// travel in JSON at all but in binary frames (AppendFrame, ParseFrame).
const (
	// TypeTerminalOpen is a request that starts a terminal session (payload
	// TerminalOpen). It is answered by TypeTerminalAttached: the opener is
	// attached at once.
	TypeTerminalOpen Type = "terminal_open"
	// TypeTerminalAttach is a request to watch an existing session (payload
	// TerminalRef). It is answered by TypeTerminalAttached, whose Screen is a
	// fresh rendering of the current screen; live output follows in frames.
	TypeTerminalAttach Type = "terminal_attach"
	// TypeTerminalDetach stops watching a session (payload TerminalRef); the
	// session goes on. Answered by TypeTerminalDetached with reason "detached".
	TypeTerminalDetach Type = "terminal_detach"
	// TypeTerminalResize sets a session's window size (payload
	// TerminalResize). No answer unless it fails.
	TypeTerminalResize Type = "terminal_resize"
	// TypeTerminalSignal sends a signal to a session's process group
	// (payload TerminalSignal). No answer unless it fails.
	TypeTerminalSignal Type = "terminal_signal"
	// TypeTerminalClose ends a session (payload TerminalRef): its process
	// group is stopped, watchers get TypeTerminalExit, and the requester gets
	// TypeTerminalClosed.
	TypeTerminalClose Type = "terminal_close"
	// TypeTerminalList asks for the thread's sessions (no payload); answered
	// by TypeTerminalSessions.
	TypeTerminalList Type = "terminal_list"

	// TypeTerminalAttached answers open and attach (payload TerminalAttached).
	TypeTerminalAttached Type = "terminal_attached"
	// TypeTerminalDetached says a connection no longer receives a session's
	// output (payload TerminalDetached): it asked to, or it was too slow.
	TypeTerminalDetached Type = "terminal_detached"
	// TypeTerminalExit tells every watcher that a session's process ended,
	// after its last output frame (payload TerminalExit).
	TypeTerminalExit Type = "terminal_exit"
	// TypeTerminalClosed answers TypeTerminalClose (payload TerminalRef).
	TypeTerminalClosed Type = "terminal_closed"
	// TypeTerminalSessions answers TypeTerminalList (payload TerminalSessions).
	TypeTerminalSessions Type = "terminal_sessions"
)

func init() {
	registerRequests(TypeTerminalOpen, TypeTerminalAttach, TypeTerminalDetach, TypeTerminalResize,
		TypeTerminalSignal, TypeTerminalClose, TypeTerminalList,
		TypeTerminalAttached, TypeTerminalDetached, TypeTerminalExit, TypeTerminalClosed, TypeTerminalSessions)
}

// IsTerminal reports whether t is one of the terminal control types.
func IsTerminal(t Type) bool {
	switch t {
	case TypeTerminalOpen, TypeTerminalAttach, TypeTerminalDetach, TypeTerminalResize,
		TypeTerminalSignal, TypeTerminalClose, TypeTerminalList,
		TypeTerminalAttached, TypeTerminalDetached, TypeTerminalExit, TypeTerminalClosed, TypeTerminalSessions:
		return true
	}
	return false
}

// TerminalOpen is the payload of TypeTerminalOpen. Zero fields mean
// defaults: a login shell, 80x24, the workspace, the agent's terminal
// environment.
type TerminalOpen struct {
	// Command is the program and its arguments; empty means a login shell.
	Command []string `json:"command,omitempty"`
	Cols    uint16   `json:"cols,omitempty"`
	Rows    uint16   `json:"rows,omitempty"`
	// Env adds or replaces environment variables (TERM defaults to
	// xterm-256color).
	Env map[string]string `json:"env,omitempty"`
	// Dir is the working directory; empty means the workspace.
	Dir string `json:"dir,omitempty"`
}

// TerminalRef names a session: the payload of TypeTerminalAttach,
// TypeTerminalDetach, TypeTerminalClose and TypeTerminalClosed.
type TerminalRef struct {
	Session string `json:"session"`
}

// TerminalResize is the payload of TypeTerminalResize.
type TerminalResize struct {
	Session string `json:"session"`
	Cols    uint16 `json:"cols"`
	Rows    uint16 `json:"rows"`
}

// TerminalSignal is the payload of TypeTerminalSignal. Signal is a name
// without the SIG prefix: INT, TERM, HUP, KILL, QUIT, TSTP, CONT, USR1, USR2.
type TerminalSignal struct {
	Session string `json:"session"`
	Signal  string `json:"signal"`
}

// TerminalInfo describes one session.
type TerminalInfo struct {
	Session string   `json:"session"`
	Command []string `json:"command"`
	Cols    uint16   `json:"cols"`
	Rows    uint16   `json:"rows"`
	// Watchers counts the connections attached on the answering side (a
	// bridge counts as one connection of its agent).
	Watchers int `json:"watchers"`
	// Exited says the process ended; ExitCode is then its status (128+n for
	// death by signal n).
	Exited   bool `json:"exited,omitempty"`
	ExitCode *int `json:"exit_code,omitempty"`
}

// TerminalAttached is the payload of TypeTerminalAttached.
type TerminalAttached struct {
	TerminalInfo
	// Screen redraws the session's current screen on a terminal of the
	// session's size: it resets the screen (entering the alternate screen if
	// the program uses it), draws every line with its styles and places the
	// cursor. Output frames that follow continue from exactly this state.
	Screen string `json:"screen"`
}

// TerminalDetached is the payload of TypeTerminalDetached.
type TerminalDetached struct {
	Session string `json:"session"`
	// Reason is DetachRequested or DetachTooSlow.
	Reason string `json:"reason"`
}

// Reasons in TerminalDetached.
const (
	// DetachRequested answers TypeTerminalDetach.
	DetachRequested = "detached"
	// DetachTooSlow: the connection fell too far behind the session's output
	// and its frames were dropped; attach again for a fresh screen.
	DetachTooSlow = "too_slow"
)

// TerminalExit is the payload of TypeTerminalExit.
type TerminalExit struct {
	Session  string `json:"session"`
	ExitCode int    `json:"exit_code"`
}

// TerminalSessions is the payload of TypeTerminalSessions.
type TerminalSessions struct {
	Sessions []TerminalInfo `json:"sessions"`
}

// Binary frames carry terminal bytes: a header, then the raw bytes, with no
// other encoding. Header: one byte, FrameVersion in the high nibble and the
// FrameKind in the low one; one byte, the length of the session id (1 to
// 255); the session id.
const (
	// FrameVersion is the binary frame format version.
	FrameVersion = 1
	// MaxFrameData is the most terminal bytes one frame carries; senders
	// coalesce output up to it.
	MaxFrameData = 64 << 10
	// MaxTerminalFrame is the longest terminal frame: a header with the
	// longest session id, and MaxFrameData bytes.
	MaxTerminalFrame = 2 + 255 + MaxFrameData
)

// FrameKind says which way a frame's bytes go.
type FrameKind byte

// Frame kinds.
const (
	// FrameOutput carries a session's output, towards clients.
	FrameOutput FrameKind = 1
	// FrameInput carries keystrokes for a session, towards the agent.
	FrameInput FrameKind = 2
	// Kinds 3 and 4 are streams' (stream.go).
)

// Frame is one decoded binary frame. Data aliases the decoded slice.
type Frame struct {
	Kind    FrameKind
	Session string
	Data    []byte
}

// ErrBadFrame is wrapped by ParseFrame's errors.
var ErrBadFrame = errors.New("bad binary frame")

// AppendFrame appends the frame for kind, session and data to dst. The
// session id must be 1 to 255 bytes and data at most MaxFrameData bytes
// (a stream frame's, LargeStreamData).
func AppendFrame(dst []byte, kind FrameKind, session string, data []byte) ([]byte, error) {
	if len(session) == 0 || len(session) > 255 {
		return dst, fmt.Errorf("%w: session id of %d bytes", ErrBadFrame, len(session))
	}
	if max := maxFrameData(kind); len(data) > max {
		return dst, fmt.Errorf("%w: %d bytes of data, more than %d", ErrBadFrame, len(data), max)
	}
	dst = append(dst, byte(FrameVersion<<4)|byte(kind&0x0f), byte(len(session)))
	dst = append(dst, session...)
	return append(dst, data...), nil
}

// maxFrameData is the most data a frame of kind carries.
func maxFrameData(kind FrameKind) int {
	if IsStreamFrame(kind) {
		return LargeStreamData
	}
	return MaxFrameData
}

// FrameHeaderLen is the header length of a frame for session.
func FrameHeaderLen(session string) int { return 2 + len(session) }

// ParseFrame decodes a binary frame. Its errors wrap ErrBadFrame.
func ParseFrame(b []byte) (Frame, error) {
	if len(b) < 2 {
		return Frame{}, fmt.Errorf("%w: %d bytes, shorter than a header", ErrBadFrame, len(b))
	}
	if v := b[0] >> 4; v != FrameVersion {
		return Frame{}, fmt.Errorf("%w: version %d, want %d", ErrBadFrame, v, FrameVersion)
	}
	kind := FrameKind(b[0] & 0x0f)
	if kind != FrameOutput && kind != FrameInput && !IsStreamFrame(kind) {
		return Frame{}, fmt.Errorf("%w: unknown kind %d", ErrBadFrame, kind)
	}
	n := int(b[1])
	if n == 0 || len(b) < 2+n {
		return Frame{}, fmt.Errorf("%w: session id of %d bytes in %d", ErrBadFrame, n, len(b))
	}
	data := b[2+n:]
	if max := maxFrameData(kind); len(data) > max {
		return Frame{}, fmt.Errorf("%w: %d bytes of data, more than %d", ErrBadFrame, len(data), max)
	}
	f := Frame{Kind: kind, Session: string(b[2 : 2+n]), Data: data}
	if IsStreamFrame(kind) {
		if err := checkStreamFrame(f); err != nil {
			return Frame{}, err
		}
	}
	return f, nil
}
