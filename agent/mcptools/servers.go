package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/boxwire/boxwire/agent/tool"
)

// Limits of the agent's MCP traffic.
const (
	connectWait   = 30 * time.Second
	listFresh     = time.Minute
	terminateWait = 2 * time.Second
	// DefaultOutputLimit is how many bytes of a result the model sees when
	// Config.OutputLimit is zero.
	DefaultOutputLimit = 30 << 10
)

// Config configures Servers.
type Config struct {
	// Servers are the image's MCP servers (Load reads them).
	Servers []Server
	// Env is every command's environment before its own Env (the agent
	// gives PATH, HOME, LANG and the egress proxy's variables, never its
	// own secrets).
	Env []string
	// Dir is a command's working directory when it names none (the
	// workspace).
	Dir string
	// OutputLimit is how many bytes of a result the model sees; zero means
	// DefaultOutputLimit.
	OutputLimit int
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Servers are the image's MCP servers. It is safe for concurrent use.
type Servers struct {
	cfg     Config
	log     *slog.Logger
	servers []*server

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // session watchers
}

// New returns the servers of cfg; it starts nothing until Tools is asked.
func New(cfg Config) *Servers {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OutputLimit <= 0 {
		cfg.OutputLimit = DefaultOutputLimit
	}
	s := &Servers{cfg: cfg, log: cfg.Logger}
	for _, sc := range cfg.Servers {
		s.servers = append(s.servers, &server{all: s, cfg: sc, log: s.log.With("mcp_server", sc.Name)})
	}
	return s
}

// Tools starts the servers not yet running and returns their tools (a
// name taken by an earlier server is skipped); a server that fails is
// logged and left out. It blocks while servers start (each at most
// connectWait) or until ctx ends. It is a loop.Config.TurnTools.
func (s *Servers) Tools(ctx context.Context) []tool.Tool {
	var out []tool.Tool
	taken := map[string]bool{}
	for _, srv := range s.servers {
		list, err := srv.list(ctx)
		if err != nil {
			srv.log.Warn("MCP server unavailable", "err", err)
			continue
		}
		for _, t := range list {
			name := srv.cfg.Prefix + t.Name
			if !srv.cfg.offers(t.Name) || taken[name] {
				continue
			}
			taken[name] = true
			out = append(out, &mcpTool{srv: srv, def: t, name: name, limit: s.cfg.OutputLimit})
		}
	}
	return out
}

// Close ends every server's session and waits for them; idempotent.
func (s *Servers) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	for _, srv := range s.servers {
		srv.drop()
	}
	s.wg.Wait()
}

// server is one MCP server and its live session, if any.
type server struct {
	all *Servers
	cfg Server
	log *slog.Logger

	mu     sync.Mutex
	sess   *mcp.ClientSession
	tools  []*mcp.Tool
	listed time.Time
	stale  atomic.Bool // tools/list_changed came: list again
}

// session returns the live session, starting the server when there is none.
func (s *server) session(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		return s.sess, nil
	}
	s.all.mu.Lock()
	closed := s.all.closed
	if !closed {
		s.all.wg.Add(1)
	}
	s.all.mu.Unlock()
	if closed {
		return nil, errors.New("the agent is shutting down")
	}
	cctx, cancel := context.WithTimeout(ctx, connectWait)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "boxwire-agent"}, &mcp.ClientOptions{
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { s.markStale() },
	})
	cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
	cmd.Dir = s.cfg.Dir
	if cmd.Dir == "" {
		cmd.Dir = s.all.cfg.Dir
	}
	cmd.Env = append([]string(nil), s.all.cfg.Env...)
	for k, v := range s.cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	sess, err := client.Connect(cctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: terminateWait}, nil)
	if err != nil {
		s.all.wg.Done()
		return nil, fmt.Errorf("start %s: %w", s.cfg.Command[0], err)
	}
	s.sess, s.tools = sess, nil
	go s.watch(sess)
	s.log.Info("MCP server started")
	return sess, nil
}

func (s *server) markStale() { s.stale.Store(true) }

// watch forgets sess when it ends, so that the next use starts it again.
func (s *server) watch(sess *mcp.ClientSession) {
	defer s.all.wg.Done()
	err := sess.Wait()
	_ = sess.Close()
	s.mu.Lock()
	if s.sess == sess {
		s.sess, s.tools = nil, nil
	}
	s.mu.Unlock()
	s.log.Info("MCP server ended", "err", err)
}

// drop closes the live session, if any.
func (s *server) drop() {
	s.mu.Lock()
	sess := s.sess
	s.sess, s.tools = nil, nil
	s.mu.Unlock()
	if sess != nil {
		_ = sess.Close()
	}
}

// list returns the server's tools, asking it when the list is stale.
func (s *server) list(ctx context.Context) ([]*mcp.Tool, error) {
	sess, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.sess == sess && s.tools != nil && time.Since(s.listed) < listFresh && !s.stale.Swap(false) {
		defer s.mu.Unlock()
		return s.tools, nil
	}
	s.mu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, connectWait)
	defer cancel()
	var tools []*mcp.Tool
	for t, err := range sess.Tools(lctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		tools = append(tools, t)
	}
	s.mu.Lock()
	if s.sess == sess {
		s.tools, s.listed = tools, time.Now()
	}
	s.mu.Unlock()
	return tools, nil
}

// mcpTool is one tool of a server, as the model sees it.
type mcpTool struct {
	srv   *server
	def   *mcp.Tool
	name  string
	limit int
}

func (t *mcpTool) Name() string        { return t.name }
func (t *mcpTool) Description() string { return t.def.Description }

// Parameters is the tool's input schema (the empty object schema when it
// has none that is an object).
func (t *mcpTool) Parameters() json.RawMessage {
	raw, err := json.Marshal(t.def.InputSchema)
	var probe map[string]any
	if err != nil || json.Unmarshal(raw, &probe) != nil || probe == nil {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return raw
}

// Run calls the tool; ctx ending cancels the call on the server.
func (t *mcpTool) Run(ctx context.Context, call tool.Call) tool.Result {
	args := map[string]any{}
	if err := tool.DecodeArgs(call.Args, &args); err != nil {
		return tool.Failed("%v", err)
	}
	sess, err := t.srv.session(ctx)
	if err != nil {
		return tool.Failed("MCP server %s is unavailable: %v", t.srv.cfg.Name, err)
	}
	cctx, cancel := context.WithTimeout(ctx, t.srv.cfg.timeout)
	defer cancel()
	res, err := sess.CallTool(cctx, &mcp.CallToolParams{Name: t.def.Name, Arguments: args})
	switch {
	case err == nil:
		return t.result(res)
	case ctx.Err() != nil:
		return tool.Failed("interrupted; the MCP server was told to stop")
	case cctx.Err() != nil:
		return tool.Failed("the call took longer than its timeout of %s; it was cancelled", t.srv.cfg.timeout)
	case errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF):
		t.srv.drop()
		return tool.Failed("MCP server %s ended during the call (%v); it is started again for the next call", t.srv.cfg.Name, err)
	}
	return tool.Failed("%s: %v", t.def.Name, err)
}

// result is the tool's text contents (structured content as JSON when it
// sent no text), capped at the output limit.
func (t *mcpTool) result(res *mcp.CallToolResult) tool.Result {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			}
		default:
			parts = append(parts, fmt.Sprintf("[%T content]", c))
		}
	}
	out := strings.Join(parts, "\n")
	if out == "" && res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			out = string(raw)
		}
	}
	r := tool.Result{Output: out}
	if len(out) > t.limit {
		r.Output = string(tool.TrimPartialRune([]byte(out[:t.limit]))) + fmt.Sprintf("\n[output cut at %d of %d bytes]", t.limit, len(out))
		r.Truncated, r.TotalBytes = true, int64(len(out))
	}
	if res.IsError {
		first, _, _ := strings.Cut(out, "\n")
		r.Err = "the tool reported an error: " + tool.OneLine(first, 200)
	}
	return r
}
