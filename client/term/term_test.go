package term_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/term"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeAgent answers hello and terminal requests like an agent with one
// session "term_1"; it records the input it gets.
type fakeAgent struct {
	mu    sync.Mutex
	input bytes.Buffer
	types []wire.Type
}

func (f *fakeAgent) serve(t *testing.T) *httptest.Server {
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			kind, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if kind == websocket.BinaryMessage {
				fr, err := wire.ParseFrame(data)
				if err == nil {
					f.mu.Lock()
					f.input.Write(fr.Data)
					f.mu.Unlock()
				}
				continue
			}
			env, err := wire.Parse(data)
			if err != nil {
				t.Errorf("parse: %v", err)
				return
			}
			f.mu.Lock()
			f.types = append(f.types, env.Type)
			f.mu.Unlock()
			f.answer(ws, env)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (f *fakeAgent) answer(ws *websocket.Conn, env wire.Envelope) {
	reply := func(e wire.Envelope) { _ = ws.WriteJSON(e) }
	switch env.Type {
	case wire.TypeHello:
		reply(wire.MustNew(wire.TypeHello, "th_1", "", wire.Hello{Version: wire.Version, Role: wire.RoleAgent, Software: "fake", Thread: "th_1"}))
	case wire.TypeTerminalOpen, wire.TypeTerminalAttach:
		reply(wire.MustNew(wire.TypeTerminalAttached, "th_1", env.ID, wire.TerminalAttached{
			TerminalInfo: wire.TerminalInfo{Session: "term_1", Cols: 80, Rows: 24}, Screen: "SCREEN|"}))
		frame, _ := wire.AppendFrame(nil, wire.FrameOutput, "term_1", []byte("live|"))
		_ = ws.WriteMessage(websocket.BinaryMessage, frame)
	case wire.TypeTerminalDetach:
		reply(wire.MustNew(wire.TypeTerminalDetached, "th_1", env.ID, wire.TerminalDetached{Session: "term_1", Reason: wire.DetachRequested}))
	case wire.TypeTerminalClose:
		reply(wire.MustNew(wire.TypeTerminalExit, "th_1", "", wire.TerminalExit{Session: "term_1", ExitCode: 137}))
		reply(wire.MustNew(wire.TypeTerminalClosed, "th_1", env.ID, wire.TerminalRef{Session: "term_1"}))
	case wire.TypeTerminalList:
		code := 3
		reply(wire.MustNew(wire.TypeTerminalSessions, "th_1", env.ID, wire.TerminalSessions{Sessions: []wire.TerminalInfo{
			{Session: "term_1", Command: []string{"bash", "-l"}, Cols: 80, Rows: 24, Watchers: 1},
			{Session: "term_2", Command: []string{"make"}, Cols: 100, Rows: 30, Exited: true, ExitCode: &code}}}))
	case wire.TypeTerminalResize:
	default:
		reply(wire.ErrorEnvelope("th_1", env.ID, wire.CodeNotFound, "no"))
	}
}

func (f *fakeAgent) got() (string, []wire.Type) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.input.String(), append([]wire.Type(nil), f.types...)
}

// syncBuf is a bytes.Buffer safe for concurrent use.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunKeys: Run draws the screen, then live output; it sends typed
// bytes as input, takes the detach keys out and ends as they say.
func TestRunKeys(t *testing.T) {
	tests := []struct {
		name      string
		keys      string
		wantInput string
		wantCode  int
		wantErr   string
	}{
		{"detach", "ls\r\x1dq", "ls\r", term.ExitOK, "detached from term_1"},
		{"literal prefix", "a\x1d\x1db\x1dxc\x1dd", "a\x1db\x1dxc", term.ExitOK, "detached from"},
		{"close", "x\x1dk", "x", 137, "closed; exit status 137"},
		{"input ends", "echo", "echo", term.ExitOK, "input ended"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeAgent{}
			srv := f.serve(t)
			var out, errOut syncBuf
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// The keys arrive after the screen: the relay starts reading
			// input once attached.
			code := term.Run(ctx, term.Options{Chat: chat.Config{URL: srv.URL}, In: strings.NewReader(tt.keys), Out: &out, Err: &errOut})
			if code != tt.wantCode {
				t.Errorf("code = %d, want %d (err output %q)", code, tt.wantCode, errOut.String())
			}
			if !strings.HasPrefix(out.String(), "SCREEN|") {
				t.Errorf("output %q does not start with the screen", out.String())
			}
			if !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("messages %q lack %q", errOut.String(), tt.wantErr)
			}
			in, _ := f.got()
			if in != tt.wantInput {
				t.Errorf("input = %q, want %q", in, tt.wantInput)
			}
		})
	}
}

func TestList(t *testing.T) {
	f := &fakeAgent{}
	srv := f.serve(t)
	var out, errOut syncBuf
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code := term.List(ctx, term.Options{Chat: chat.Config{URL: srv.URL}, Out: &out, Err: &errOut}); code != term.ExitOK {
		t.Fatalf("code %d: %s", code, errOut.String())
	}
	for _, want := range []string{"thread th_1", "term_1", "80x24", "running", "bash -l", "term_2", "exited 3"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("list lacks %q:\n%s", want, out.String())
		}
	}
}

// TestConnInputFrames: big input is split into frames and arrives whole;
// calls after Close fail with ErrClosed.
func TestConnInputFrames(t *testing.T) {
	f := &fakeAgent{}
	srv := f.serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := term.Dial(ctx, chat.Config{URL: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("0123456789abcdef", 10<<10) // 160 KiB: three frames
	if err := c.Input(ctx, "term_1", []byte(big)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(ctx); err != nil { // a round trip: the input was read before
		t.Fatal(err)
	}
	if in, _ := f.got(); in != big {
		t.Errorf("got %d bytes of input, want %d", len(in), len(big))
	}
	c.Close()
	if err := c.Input(ctx, "term_1", []byte("x")); !errors.Is(err, term.ErrClosed) {
		t.Errorf("input after Close: %v, want ErrClosed", err)
	}
}
