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
	// StreamWindow is the credit each side of a stream starts with unless
	// both offered StreamLimits: how many bytes of data frames it may send
	// before the other side returns credit with a window frame. A receiver
	// that gets more than it gave credit for closes the stream
	// (CodeBadMessage).
	StreamWindow = 256 << 10
	// MaxStreamData is the most bytes one data frame of a stream carries
	// unless both sides offered StreamLimits.
	MaxStreamData = 32 << 10
	// LargeStreamWindow and LargeStreamData are the limits this build
	// offers (OfferedStreamLimits), and the most it accepts in any frame:
	// four times fewer frames, and wake-ups on both sides, for a bulk
	// stream such as a download through a preview.
	LargeStreamWindow = 512 << 10
	LargeStreamData   = 128 << 10
	// MaxStreamID is the longest stream id, in bytes.
	MaxStreamID = 64
	// MaxBinaryFrame is the longest binary frame of any kind: a header
	// with the longest id, and a stream's largest data. A reader that
	// cuts frames at MaxBinaryFrame+1 bytes has ParseFrame refuse the cut
	// ones.
	MaxBinaryFrame = 2 + 255 + LargeStreamData
)

// StreamLimits are what one side of a stream accepts as its receiver:
// port_open carries the opener's, port_opened the other side's. A stream
// uses them when both sides offered theirs (Negotiate); a side that offers
// none (a build before them) gets DefaultStreamLimits both ways.
type StreamLimits struct {
	// Data is the most bytes one data frame towards this side carries.
	Data int `json:"data"`
	// Window is the credit the other side starts with: the most bytes of
	// the stream this side holds unread. At least Data.
	Window int `json:"window"`
}

// DefaultStreamLimits are the limits of a stream one side of which
// offered none. Not to be changed, as OfferedStreamLimits.
var DefaultStreamLimits = StreamLimits{Data: MaxStreamData, Window: StreamWindow}

// OfferedStreamLimits are the limits this build offers for its side;
// messages carry a pointer to it.
var OfferedStreamLimits = StreamLimits{Data: LargeStreamData, Window: LargeStreamWindow}

// Negotiate returns a stream's limits: own, what this side accepts (its
// Inbox), and peer, what it may send (its Credit and frame size). offer is
// what the peer's port_open or port_opened said, nil for nothing; mine is
// what this side offered, nil for nothing (it answers a peer that offered
// none). With both set, each side gets its own offer, the peer's clamped
// to what this build handles (a smaller frame or window than the peer
// accepts is always safe); with either nil, DefaultStreamLimits both
// ways. An offer outside 1 ≤ Data ≤ Window is an error: the stream must
// not open.
func Negotiate(mine, offer *StreamLimits) (own, peer StreamLimits, err error) {
	if mine == nil || offer == nil {
		return DefaultStreamLimits, DefaultStreamLimits, nil
	}
	if offer.Data < 1 || offer.Window < offer.Data {
		return StreamLimits{}, StreamLimits{}, fmt.Errorf("%w: stream limits of %d bytes a frame in a window of %d (want 1 ≤ data ≤ window)", ErrBadFrame, offer.Data, offer.Window)
	}
	peer = StreamLimits{Data: min(offer.Data, LargeStreamData), Window: min(offer.Window, LargeStreamWindow)}
	return *mine, peer, nil
}

// PortOpen is the payload of TypePortOpen.
type PortOpen struct {
	// Stream is the opener's id for the stream (1 to MaxStreamID bytes),
	// unique among its open streams on this connection.
	Stream string `json:"stream"`
	// Port is the TCP port on the sandbox's loopback, 1 to 65535. There is
	// no address: the agent dials its own loopback and nothing else.
	Port int `json:"port"`
	// Limits are what the opener accepts (OfferedStreamLimits); absent
	// from a build before them.
	Limits *StreamLimits `json:"limits,omitempty"`
}

// StreamRef names a stream: the payload of TypePortOpened.
type StreamRef struct {
	Stream string `json:"stream"`
	// Limits are, in port_opened, what the answering side accepts; only
	// when the port_open offered its own (Negotiate).
	Limits *StreamLimits `json:"limits,omitempty"`
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
	// the receiver's StreamLimits.Data per frame. An empty data frame ends the sender's
	// direction (its side shut down writing); the other direction goes on.
	FrameStreamData FrameKind = 3
	// FrameStreamWindow returns credit, either way: its data is 4 bytes,
	// big-endian, the number of bytes of the stream the sender has taken
	// from its buffer since its last window frame.
	FrameStreamWindow FrameKind = 4
)

// AppendStreamData appends a data frame for stream to dst. The caller
// keeps data within the peer's limits; more than LargeStreamData is an
// error.
func AppendStreamData(dst []byte, stream string, data []byte) ([]byte, error) {
	if len(data) > LargeStreamData {
		return dst, fmt.Errorf("%w: %d bytes of stream data, more than %d", ErrBadFrame, len(data), LargeStreamData)
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
// ParseFrame decoded: the id's length and the window's size, its most
// for any stream (a stream's own limits are its Inbox's and Credit's).
func checkStreamFrame(f Frame) error {
	if len(f.Session) > MaxStreamID {
		return fmt.Errorf("%w: stream id of %d bytes, more than %d", ErrBadFrame, len(f.Session), MaxStreamID)
	}
	if f.Kind == FrameStreamWindow { // data frames: ParseFrame checked their size
		if len(f.Data) != 4 {
			return fmt.Errorf("%w: a window frame carries 4 bytes, not %d", ErrBadFrame, len(f.Data))
		}
		if binary.BigEndian.Uint32(f.Data) == 0 || binary.BigEndian.Uint32(f.Data) > LargeStreamWindow {
			return fmt.Errorf("%w: a window of %d bytes (1 to %d)", ErrBadFrame, binary.BigEndian.Uint32(f.Data), LargeStreamWindow)
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
