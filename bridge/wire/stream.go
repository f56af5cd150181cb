package wire

import (
	"encoding/binary"
	"fmt"
)

// Port streams (docs/protocol.md, "Ports and streams"): a bridge (or a
// client of a standalone agent) asks the agent to open a TCP connection to
// a port on the sandbox's own loopback and carries its bytes on the one
// WebSocket it already has, beside the conversation. None of these
// messages is an event but TypePorts, which is both an event (when what
// listens changes) and the reply to TypePortList.
const (
	// TypePortOpen is a request to open a stream to 127.0.0.1:port inside
	// the sandbox (payload PortOpen). It is answered by TypePortOpened once
	// connected, or by TypeStreamClose with an error when nothing listens.
	TypePortOpen Type = "port_open"
	// TypePortOpened answers TypePortOpen: the stream is connected and
	// both sides may send data frames (payload StreamRef).
	TypePortOpened Type = "port_opened"
	// TypeStreamClose ends a stream at once, in either direction (payload
	// StreamClose); the other side answers nothing and drops what it holds
	// of the stream. An orderly end of one direction is an empty data
	// frame instead.
	TypeStreamClose Type = "stream_close"
	// TypePortList asks the agent what listens on the sandbox's loopback
	// (no payload); answered by TypePorts.
	TypePortList Type = "port_list"
	// TypePorts says what listens (payload Ports): an event, with a seq,
	// whenever that changes; and the reply to TypePortList.
	TypePorts Type = "ports"
)

func init() {
	registerRequests(TypePortOpen, TypePortOpened, TypeStreamClose, TypePortList)
	registerEvents(TypePorts)
}

// IsStream reports whether t is one of the stream control types that
// travel only between a bridge and its agent: a client of the bridge
// reaches ports over HTTP instead (docs/protocol.md).
func IsStream(t Type) bool {
	switch t {
	case TypePortOpen, TypePortOpened, TypeStreamClose, TypePortList:
		return true
	}
	return false
}

// Stream limits.
const (
	// StreamWindow is the credit each side of a stream starts with: how
	// many bytes of data frames it may send before the other side returns
	// credit with a window frame. A receiver that gets more than it gave
	// credit for closes the stream (CodeBadMessage).
	StreamWindow = 256 << 10
	// MaxStreamData is the most bytes one data frame of a stream carries.
	MaxStreamData = 32 << 10
	// MaxStreamID is the longest stream id, in bytes.
	MaxStreamID = 64
)

// PortOpen is the payload of TypePortOpen.
type PortOpen struct {
	// Stream is the opener's id for the stream (1 to MaxStreamID bytes),
	// unique among its open streams on this connection.
	Stream string `json:"stream"`
	// Port is the TCP port on the sandbox's loopback, 1 to 65535. There is
	// no address: the agent dials its own loopback and nothing else.
	Port int `json:"port"`
}

// StreamRef names a stream: the payload of TypePortOpened.
type StreamRef struct {
	Stream string `json:"stream"`
}

// StreamClose is the payload of TypeStreamClose.
type StreamClose struct {
	Stream string `json:"stream"`
	// Code says why when the stream did not end normally: CodePortClosed
	// (nothing listens), CodeBadMessage (a frame broke the rules),
	// CodeStreamLimit, CodeIdle, CodeInternal; empty for a plain close.
	Code Code `json:"code,omitempty"`
	// Message explains Code for a person.
	Message string `json:"message,omitempty"`
}

// Error codes of streams.
const (
	// CodePortClosed: nothing listens on the port (the connection was
	// refused), so no stream opened.
	CodePortClosed Code = "port_closed"
	// CodeStreamLimit: the connection (or thread) already has its
	// maximum of open streams.
	CodeStreamLimit Code = "stream_limit"
	// CodeIdle: the stream carried nothing either way for the idle limit.
	CodeIdle Code = "idle"
)

// Ports is the payload of TypePorts: every TCP port a process in the
// sandbox listens on where the agent can reach it (its loopback, or every
// address), sorted by port.
type Ports struct {
	Ports []Port `json:"ports"`
}

// Port is one listening port.
type Port struct {
	Port int `json:"port"`
	// Address is the address it listens on: "127.0.0.1", "::1", "0.0.0.0"
	// or "::".
	Address string `json:"address"`
}

// Binary frames of streams share the terminal frames' header (the
// stream id in the session id's place, at most MaxStreamID bytes).
const (
	// FrameStreamData carries a stream's bytes, either way, at most
	// MaxStreamData per frame. An empty data frame ends the sender's
	// direction (its side shut down writing); the other direction goes on.
	FrameStreamData FrameKind = 3
	// FrameStreamWindow returns credit, either way: its data is 4 bytes,
	// big-endian, the number of bytes of the stream the sender has taken
	// from its buffer since its last window frame.
	FrameStreamWindow FrameKind = 4
)

// AppendStreamData appends a data frame for stream to dst.
func AppendStreamData(dst []byte, stream string, data []byte) ([]byte, error) {
	if len(data) > MaxStreamData {
		return dst, fmt.Errorf("%w: %d bytes of stream data, more than %d", ErrBadFrame, len(data), MaxStreamData)
	}
	if len(stream) > MaxStreamID {
		return dst, fmt.Errorf("%w: stream id of %d bytes, more than %d", ErrBadFrame, len(stream), MaxStreamID)
	}
	return AppendFrame(dst, FrameStreamData, stream, data)
}

// AppendStreamWindow appends a window frame returning n bytes of credit
// for stream to dst.
func AppendStreamWindow(dst []byte, stream string, n uint32) ([]byte, error) {
	if len(stream) > MaxStreamID {
		return dst, fmt.Errorf("%w: stream id of %d bytes, more than %d", ErrBadFrame, len(stream), MaxStreamID)
	}
	return AppendFrame(dst, FrameStreamWindow, stream, binary.BigEndian.AppendUint32(nil, n))
}

// IsStreamFrame reports whether kind is a stream frame's.
func IsStreamFrame(kind FrameKind) bool { return kind == FrameStreamData || kind == FrameStreamWindow }

// checkStreamFrame applies the stream frames' own rules to a frame
// ParseFrame decoded: the id's length, the data's size, the window's.
func checkStreamFrame(f Frame) error {
	if len(f.Session) > MaxStreamID {
		return fmt.Errorf("%w: stream id of %d bytes, more than %d", ErrBadFrame, len(f.Session), MaxStreamID)
	}
	switch f.Kind {
	case FrameStreamData:
		if len(f.Data) > MaxStreamData {
			return fmt.Errorf("%w: %d bytes of stream data, more than %d", ErrBadFrame, len(f.Data), MaxStreamData)
		}
	case FrameStreamWindow:
		if len(f.Data) != 4 {
			return fmt.Errorf("%w: a window frame carries 4 bytes, not %d", ErrBadFrame, len(f.Data))
		}
		if binary.BigEndian.Uint32(f.Data) == 0 || binary.BigEndian.Uint32(f.Data) > StreamWindow {
			return fmt.Errorf("%w: a window of %d bytes (1 to %d)", ErrBadFrame, binary.BigEndian.Uint32(f.Data), StreamWindow)
		}
	}
	return nil
}

// WindowOf returns the credit a window frame returns (ParseFrame checked
// its size).
func (f Frame) WindowOf() uint32 {
	if len(f.Data) != 4 {
		return 0
	}
	return binary.BigEndian.Uint32(f.Data)
}
