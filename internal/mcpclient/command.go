package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ProtocolVersion is the MCP version the command client asks for; it
// also speaks the older ones a server may answer with (protocolVersions):
// what it uses — initialize, tools/list, tools/call, cancellation, ping,
// progress and list_changed notifications — is alike in all of them.
const ProtocolVersion = "2025-11-25"

var protocolVersions = []string{ProtocolVersion, "2025-06-18", "2025-03-26", "2024-11-05"}

// MaxToolPages bounds how many pages of tools/list are followed.
const MaxToolPages = 100

// readGrace is how long the output a server wrote before it exited has
// to be read before its stdout is closed (a child of the server may hold
// it open).
const readGrace = time.Second

// Implementation names a client to its servers (clientInfo).
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// CommandConfig configures DialCommand. The zero value is usable.
type CommandConfig struct {
	// Client names the client to the server.
	Client Implementation
	// ListChanged is called on a notifications/tools/list_changed; nil
	// ignores them. It runs on the session's reader and must not block.
	ListChanged func()
	// Progress gets the progress messages of a call that asked for them
	// (CallParams.ProgressToken); nil ignores them. It runs on the
	// session's reader and must not block.
	Progress func(token, message string)
	// TerminateWait is how long the server has to exit after its stdin
	// closed, and again after SIGTERM, before it is killed; zero means
	// mcpclient.TerminateWait.
	TerminateWait time.Duration
	// Logger receives the server's log notifications and what it wrote
	// that is not JSON-RPC; nil discards them.
	Logger *slog.Logger
}

// CommandSession is an MCP session with a server the client started: the
// stdio transport, JSON-RPC 2.0 one message a line on the command's stdin
// and stdout. The end of the command's stderr is kept for the session's
// end error. Its methods are safe for concurrent use.
type CommandSession struct {
	cfg    CommandConfig
	cmd    *exec.Cmd
	rpc    *rpcConn
	stdin  *os.File // our ends of the pipes
	stdout *os.File
	stderr *Tail

	wg        sync.WaitGroup // the reader, the writer and the waiter
	readDone  chan struct{}  // the reader returned (readErr)
	readErr   error
	exited    chan struct{} // the command was waited for (exitErr)
	exitErr   error
	closing   atomic.Bool
	terminate sync.Once
}

// DialCommand starts cmd as an MCP server and initializes a session
// (initialize, notifications/initialized) within ctx; the session then
// lives until the server exits, hangs up or Close. cmd's Stdin, Stdout
// and Stderr must be nil: the session sets them. It blocks until the
// server answered or ctx ends; then the command is ended.
func DialCommand(ctx context.Context, cmd *exec.Cmd, cfg CommandConfig) (*CommandSession, error) {
	if cmd.Stdin != nil || cmd.Stdout != nil || cmd.Stderr != nil {
		return nil, errors.New("the command's stdin, stdout and stderr must be unset")
	}
	if cfg.TerminateWait <= 0 {
		cfg.TerminateWait = TerminateWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &CommandSession{cfg: cfg, cmd: cmd, stderr: &Tail{}, readDone: make(chan struct{}), exited: make(chan struct{})}
	s.rpc = newRPCConn(cfg.Logger, s.notified)
	if err := s.start(); err != nil {
		return nil, err
	}
	if err := s.initialize(ctx); err != nil {
		_ = s.Close()
		if !Ended(err) { // else its error has the words
			err = fmt.Errorf("%w%s", err, s.stderr.Words())
		}
		return nil, err
	}
	return s, nil
}

// start starts the command on two pipes (exec copies its stderr into
// s.stderr) and the session's goroutines.
func (s *CommandSession) start() error {
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return err
	}
	s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = inR, outW, s.stderr
	s.cmd.WaitDelay = s.cfg.TerminateWait // for a child of the server's that holds its stderr
	err = s.cmd.Start()
	inR.Close() // the command's ends
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return err
	}
	s.stdin, s.stdout = inW, outR
	s.wg.Add(3)
	go func() { defer s.wg.Done(); s.rpc.write(inW) }()
	go s.read()
	go s.wait()
	return nil
}

// initialize is the handshake.
func (s *CommandSession) initialize(ctx context.Context) error {
	var res struct {
		ProtocolVersion string         `json:"protocolVersion"`
		ServerInfo      Implementation `json:"serverInfo"`
	}
	params := map[string]any{"protocolVersion": ProtocolVersion, "capabilities": map[string]any{}, "clientInfo": s.cfg.Client}
	if err := s.rpc.call(ctx, "initialize", params, &res); err != nil {
		return err
	}
	if !slices.Contains(protocolVersions, res.ProtocolVersion) {
		return fmt.Errorf("initialize: the server speaks MCP %q; this client speaks %v", res.ProtocolVersion, protocolVersions)
	}
	s.cfg.Logger.Debug("MCP server initialized", "server", res.ServerInfo.Name, "version", res.ServerInfo.Version, "protocol", res.ProtocolVersion)
	return s.rpc.notify(ctx, "notifications/initialized", nil)
}

// read is the session's reader: once the server's stdout ends, the
// server is stopped if it did not exit.
func (s *CommandSession) read() {
	defer s.wg.Done()
	s.readErr = s.rpc.read(s.stdout)
	s.stdout.Close() // a server still writing gets EPIPE
	close(s.readDone)
	s.stop()
}

// wait waits for the command, then for its output to be read (at most
// readGrace before its stdout is closed), ends the writer and has every
// call fail with why the session ended.
func (s *CommandSession) wait() {
	defer s.wg.Done()
	s.exitErr = s.cmd.Wait()
	close(s.exited)
	select {
	case <-s.readDone:
	case <-time.After(readGrace):
	}
	s.stdout.Close() // ends the reader when a child of the server holds the pipe
	<-s.readDone
	s.rpc.stop()
	s.stdin.Close()
	s.rpc.end(s.endErr())
}

// endErr says why the session ended.
func (s *CommandSession) endErr() error {
	if s.closing.Load() {
		return fmt.Errorf("%w: it was closed", ErrEnded)
	}
	why := "the server exited"
	var exit *exec.ExitError
	switch {
	case errors.As(s.exitErr, &exit):
		why += " (" + exit.String() + ")"
	case s.exitErr != nil && !errors.Is(s.exitErr, exec.ErrWaitDelay):
		why += " (" + s.exitErr.Error() + ")"
	}
	if s.readErr != nil {
		why = s.readErr.Error() + "; " + why
	}
	return fmt.Errorf("%w: %s%s", ErrEnded, why, s.stderr.Words())
}

// stop ends the command, once: its stdin is closed; if it has not exited
// after TerminateWait it gets SIGTERM, and after as long again SIGKILL.
// It blocks until the command exited.
func (s *CommandSession) stop() {
	s.terminate.Do(func() {
		s.rpc.stop()
		s.stdin.Close()
		for _, sig := range []os.Signal{syscall.SIGTERM, os.Kill} {
			select {
			case <-s.exited:
				return
			case <-time.After(s.cfg.TerminateWait):
			}
			_ = s.cmd.Process.Signal(sig)
		}
	})
	<-s.exited
}

// Close ends the session: the command is stopped (stdin closed, then
// signalled) and its goroutines are waited for. A call in flight fails
// with an error that is Ended. It blocks until the command exited, at
// most about twice TerminateWait; it is idempotent.
func (s *CommandSession) Close() error {
	s.closing.Store(true)
	s.stop()
	s.wg.Wait()
	return nil
}

// Wait blocks until the session ended and returns why (it wraps
// ErrEnded).
func (s *CommandSession) Wait() error {
	<-s.rpc.ended
	return s.rpc.endErr
}

// ListTools lists the server's tools, following at most MaxToolPages
// pages.
func (s *CommandSession) ListTools(ctx context.Context) ([]Tool, error) {
	var out []Tool
	var cursor string
	for range MaxToolPages {
		var res struct {
			Tools      []Tool `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		params := struct {
			Cursor string `json:"cursor,omitempty"`
		}{cursor}
		if err := s.rpc.call(ctx, "tools/list", params, &res); err != nil {
			return nil, err
		}
		out = append(out, res.Tools...)
		if res.NextCursor == "" {
			return out, nil
		}
		cursor = res.NextCursor
	}
	return nil, fmt.Errorf("tools/list: more than %d pages", MaxToolPages)
}

// CallTool calls a tool (tools/call); ctx ending cancels it on the server.
func (s *CommandSession) CallTool(ctx context.Context, p CallParams) (*CallToolResult, error) {
	params := struct {
		Name      string         `json:"name"`
		Arguments any            `json:"arguments,omitempty"`
		Meta      map[string]any `json:"_meta,omitempty"`
	}{Name: p.Name, Arguments: p.Arguments}
	if p.ProgressToken != "" {
		params.Meta = map[string]any{"progressToken": p.ProgressToken}
	}
	var res CallToolResult
	if err := s.rpc.call(ctx, "tools/call", params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// notified handles a server's notification, on the reader.
func (s *CommandSession) notified(method string, raw json.RawMessage) {
	switch method {
	case "notifications/tools/list_changed":
		if s.cfg.ListChanged != nil {
			s.cfg.ListChanged()
		}
	case "notifications/progress":
		var p struct {
			Token   any    `json:"progressToken"`
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &p) != nil || s.cfg.Progress == nil || p.Message == "" {
			return
		}
		if tok, ok := p.Token.(string); ok {
			s.cfg.Progress(tok, p.Message)
		}
	case "notifications/message":
		var p struct {
			Level  string          `json:"level"`
			Logger string          `json:"logger"`
			Data   json.RawMessage `json:"data"`
		}
		if json.Unmarshal(raw, &p) == nil {
			s.cfg.Logger.Debug("MCP server log", "level", p.Level, "logger", p.Logger, "data", clip(p.Data))
		}
	}
}
