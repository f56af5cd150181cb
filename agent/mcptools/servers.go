package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"

	"github.com/boxwire/boxwire/agent/tool"
	"github.com/boxwire/boxwire/internal/mcpclient"
)

// DefaultOutputLimit is how many bytes of a result the model sees when
// Config.OutputLimit is zero.
const DefaultOutputLimit = 30 << 10

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

// Servers are the image's MCP servers, and those the threads declare
// (thread.go). It is safe for concurrent use.
type Servers struct {
	cfg     Config
	log     *slog.Logger
	group   *mcpclient.Group
	servers []*server
	threads threadSets // the threads' own servers (thread.go)
}

// New returns the servers of cfg; it starts nothing until Tools is asked.
func New(cfg Config) *Servers { return newServers(cfg, errors.New("the agent is shutting down")) }

// newServers is New; a call after Close fails with closedErr.
func newServers(cfg Config, closedErr error) *Servers {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OutputLimit <= 0 {
		cfg.OutputLimit = DefaultOutputLimit
	}
	s := &Servers{cfg: cfg, log: cfg.Logger, group: mcpclient.NewGroup(closedErr)}
	for _, sc := range cfg.Servers {
		srv := &server{all: s, cfg: sc, log: s.log.With("mcp_server", sc.Name)}
		srv.conn = s.group.Conn(mcpclient.ConnConfig{Dial: srv.dial, Logger: srv.log})
		s.servers = append(s.servers, srv)
	}
	return s
}

// Tools starts the servers not yet running and returns their tools (a
// name taken by an earlier server is skipped); a server that fails is
// logged and left out. It blocks while servers start (each at most
// mcpclient.ConnectWait) or until ctx ends. It is a loop.Config.TurnTools.
func (s *Servers) Tools(ctx context.Context) []tool.Tool {
	var out []tool.Tool
	taken := map[string]bool{}
	for _, srv := range s.servers {
		list, err := srv.conn.Tools(ctx)
		if err != nil {
			srv.log.Warn("MCP server unavailable", "err", err)
			continue
		}
		for _, t := range list {
			name := srv.cfg.Prefix + t.Name
			if !mcpclient.MatchAny(srv.cfg.Tools, t.Name) || taken[name] {
				continue
			}
			taken[name] = true
			out = append(out, &mcpTool{srv: srv, def: t, name: name, limit: s.cfg.OutputLimit})
		}
	}
	return out
}

// Close ends every server's session, the threads' too, and waits for
// them; idempotent.
func (s *Servers) Close() {
	s.threads.close()
	s.group.Close()
}

// server is one MCP server and its session.
type server struct {
	all  *Servers
	cfg  Server
	log  *slog.Logger
	conn *mcpclient.Conn
}

// dial starts the server's command and initializes a session
// (mcpclient.DialCommand: the agent's own stdio client).
func (s *server) dial(ctx context.Context, listChanged func()) (mcpclient.Session, error) {
	cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
	cmd.Dir = s.cfg.Dir
	if cmd.Dir == "" {
		cmd.Dir = s.all.cfg.Dir
	}
	cmd.Env = append([]string(nil), s.all.cfg.Env...)
	for k, v := range s.cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	sess, err := mcpclient.DialCommand(ctx, cmd, mcpclient.CommandConfig{
		Client: mcpclient.Implementation{Name: "boxwire-agent"}, ListChanged: listChanged, Logger: s.log,
	})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.cfg.Command[0], err)
	}
	return sess, nil
}

// mcpTool is one tool of a server, as the model sees it.
type mcpTool struct {
	srv   *server
	def   mcpclient.Tool
	name  string
	limit int
}

func (t *mcpTool) Name() string        { return t.name }
func (t *mcpTool) Description() string { return t.def.Description }

// Parameters is the tool's input schema (the empty object schema when it
// has none that is an object).
func (t *mcpTool) Parameters() json.RawMessage { return mcpclient.Schema(t.def) }

// Run calls the tool; ctx ending cancels the call on the server.
func (t *mcpTool) Run(ctx context.Context, call tool.Call) tool.Result {
	args := map[string]any{}
	if err := tool.DecodeArgs(call.Args, &args); err != nil {
		return tool.Failed("%v", err)
	}
	sess, _, err := t.srv.conn.Session(ctx)
	if err != nil {
		return tool.Failed("MCP server %s is unavailable: %v", t.srv.cfg.Name, err)
	}
	cctx, cancel := context.WithTimeout(ctx, t.srv.cfg.CallTimeout)
	defer cancel()
	res, err := sess.CallTool(cctx, mcpclient.CallParams{Name: t.def.Name, Arguments: args})
	switch {
	case err == nil:
		return t.result(res)
	case ctx.Err() != nil:
		return tool.Failed("interrupted; the MCP server was told to stop")
	case cctx.Err() != nil:
		return tool.Failed("the call took longer than its timeout of %s; it was cancelled", t.srv.cfg.CallTimeout)
	case mcpclient.Ended(err):
		t.srv.conn.Drop(sess)
		return tool.Failed("MCP server %s ended during the call (%v); it is started again for the next call", t.srv.cfg.Name, err)
	}
	return tool.Failed("%s: %v", t.def.Name, err)
}

// result is the tool's text (mcpclient.Text), capped at the output limit.
func (t *mcpTool) result(res *mcpclient.CallToolResult) tool.Result {
	out := mcpclient.Text(res)
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
