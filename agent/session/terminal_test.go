package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/gorilla/websocket"
)

// readTerminal reads frames until an envelope of type typ, collecting the
// output of session from binary frames on the way.
func (c *client) readTerminal(typ wire.Type, out *strings.Builder) wire.Envelope {
	c.t.Helper()
	for {
		if err := c.ws.SetReadDeadline(time.Now().Add(waitFor)); err != nil {
			c.t.Fatal(err)
		}
		mt, data, err := c.ws.ReadMessage()
		if err != nil {
			c.t.Fatalf("read while waiting for %s: %v (output so far %q)", typ, err, out.String())
		}
		if mt == websocket.BinaryMessage {
			f, err := wire.ParseFrame(data)
			if err != nil || f.Kind != wire.FrameOutput {
				c.t.Fatalf("bad frame %v", err)
			}
			out.Write(f.Data)
			continue
		}
		env, err := wire.Parse(data)
		if err != nil {
			c.t.Fatal(err)
		}
		if env.Type == typ {
			return env
		}
		if env.Type == wire.TypeError {
			c.t.Fatalf("error while waiting for %s: %s", typ, env.Data)
		}
	}
}

func (c *client) input(session, text string) {
	c.t.Helper()
	frame, err := wire.AppendFrame(nil, wire.FrameInput, session, []byte(text))
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.ws.WriteMessage(websocket.BinaryMessage, frame); err != nil {
		c.t.Fatal(err)
	}
}

func TestTerminalOverWebSocket(t *testing.T) {
	e := newEnv(t, session.Config{Loop: loop.Config{Model: &fakeModel{}, Workspace: t.TempDir()}})
	c := e.dial("")
	c.send(wire.MustNew(wire.TypeTerminalOpen, "", "o1", wire.TerminalOpen{Command: []string{"bash", "-c", "read x; echo got=$x; read y; exit 5"}, Cols: 90, Rows: 20}))
	var out strings.Builder
	att := decode[wire.TerminalAttached](t, c.readTerminal(wire.TypeTerminalAttached, &out))
	if att.Cols != 90 || att.Rows != 20 || att.Session == "" {
		t.Fatalf("attached %+v", att)
	}
	c.input(att.Session, "hello\n")
	for deadline := time.Now().Add(waitFor); !strings.Contains(out.String(), "got=hello"); {
		if time.Now().After(deadline) {
			t.Fatalf("never saw got=hello; output %q", out.String())
		}
		c.send(wire.MustNew(wire.TypeTerminalList, "", "l1", nil))
		c.readTerminal(wire.TypeTerminalSessions, &out)
	}

	// A second connection attaches and sees the screen so far.
	c2 := e.dial("")
	c2.send(wire.MustNew(wire.TypeTerminalAttach, "", "a2", wire.TerminalRef{Session: att.Session}))
	var out2 strings.Builder
	att2 := decode[wire.TerminalAttached](t, c2.readTerminal(wire.TypeTerminalAttached, &out2))
	if !strings.Contains(att2.Screen, "got=hello") || att2.Watchers != 2 {
		t.Fatalf("second attach: watchers %d screen %q", att2.Watchers, att2.Screen)
	}
	// The first connection leaves; the session goes on and reports its exit.
	c.ws.Close()
	c2.input(att.Session, "\n")
	if ex := decode[wire.TerminalExit](t, c2.readTerminal(wire.TypeTerminalExit, &out2)); ex.ExitCode != 5 {
		t.Fatalf("exit %+v", ex)
	}
	c2.send(wire.MustNew(wire.TypeTerminalClose, "", "c1", wire.TerminalRef{Session: att.Session}))
	c2.readTerminal(wire.TypeTerminalClosed, &out2)
	c2.send(wire.MustNew(wire.TypeTerminalResize, "", "r1", wire.TerminalResize{Session: att.Session, Cols: 10, Rows: 10}))
	expectError(t, c2.readTerminal(wire.TypeError, &out2), wire.CodeNotFound, "r1")
}
