package wire_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

func TestFrameRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		kind    wire.FrameKind
		session string
		data    []byte
	}{
		{"output", wire.FrameOutput, "term_1", []byte("hello\r\n")},
		{"input", wire.FrameInput, "term_2", []byte{3}},
		{"empty data", wire.FrameOutput, "s", nil},
		{"binary data", wire.FrameOutput, "term_1", []byte{0, 0xff, 0x1b, '[', 'H'}},
		{"largest", wire.FrameOutput, strings.Repeat("x", 255), bytes.Repeat([]byte{'a'}, wire.MaxFrameData)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := wire.AppendFrame(nil, tt.kind, tt.session, tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != wire.FrameHeaderLen(tt.session)+len(tt.data) {
				t.Fatalf("frame of %d bytes", len(b))
			}
			f, err := wire.ParseFrame(b)
			if err != nil {
				t.Fatal(err)
			}
			if f.Kind != tt.kind || f.Session != tt.session || !bytes.Equal(f.Data, tt.data) {
				t.Fatalf("got %+v", f)
			}
		})
	}
}

func TestFrameHeaderBytes(t *testing.T) {
	t.Parallel()
	b, err := wire.AppendFrame([]byte("keep"), wire.FrameOutput, "ab", []byte("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte("keep\x11\x02abhi"); !bytes.Equal(b, want) {
		t.Fatalf("frame = %q, want %q", b, want)
	}
}

func TestBadFrames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"one byte", []byte{0x11}},
		{"version 2", []byte{0x21, 1, 's'}},
		{"kind 0", []byte{0x10, 1, 's'}},
		{"kind 5", []byte{0x15, 1, 's'}},
		{"no session", []byte{0x11, 0, 'x'}},
		{"short session", []byte{0x11, 5, 's'}},
		{"too much data", append([]byte{0x11, 1, 's'}, make([]byte, wire.MaxFrameData+1)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := wire.ParseFrame(tt.in); !errors.Is(err, wire.ErrBadFrame) {
				t.Fatalf("err = %v, want ErrBadFrame", err)
			}
		})
	}
	if _, err := wire.AppendFrame(nil, wire.FrameOutput, "", nil); !errors.Is(err, wire.ErrBadFrame) {
		t.Errorf("empty session: %v", err)
	}
	if _, err := wire.AppendFrame(nil, wire.FrameOutput, strings.Repeat("x", 256), nil); !errors.Is(err, wire.ErrBadFrame) {
		t.Errorf("long session: %v", err)
	}
	if _, err := wire.AppendFrame(nil, wire.FrameOutput, "s", make([]byte, wire.MaxFrameData+1)); !errors.Is(err, wire.ErrBadFrame) {
		t.Errorf("large data: %v", err)
	}
}

func TestTerminalTypesAreRequests(t *testing.T) {
	t.Parallel()
	for _, typ := range []wire.Type{wire.TypeTerminalOpen, wire.TypeTerminalAttached, wire.TypeTerminalExit, wire.TypeTerminalSessions} {
		if !wire.Known(typ) || wire.IsEvent(typ) || !wire.IsTerminal(typ) {
			t.Errorf("%s: known %v event %v terminal %v", typ, wire.Known(typ), wire.IsEvent(typ), wire.IsTerminal(typ))
		}
	}
	if wire.IsTerminal(wire.TypePing) {
		t.Error("ping counted as a terminal type")
	}
}
