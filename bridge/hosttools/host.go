package hosttools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/internal/mcpclient"
)

// Limits of the host's MCP traffic (beside mcpclient's ConnectWait,
// ListFresh and TerminateWait).
const (
	// MaxResultBytes caps a result's output so that it fits a wire frame
	// with room to spare; the rest is cut with a note.
	MaxResultBytes = 512 << 10
	// retryWait is how long a server that could not be reached is not
	// tried again (its error is answered at once), so that a dead server
	// does not hold up every turn's start.
	retryWait = 15 * time.Second
)

// Config configures a Host.
type Config struct {
	// Servers are the MCP servers (Load reads them).
	Servers []ServerConfig
	// Secrets are the bridge's own secrets (its token, the model key, the
	// policy's credentials), masked in every result besides the servers'.
	Secrets []string
	// Getenv reads the bridge's environment for what a command inherits
	// (PATH, HOME, LANG, TMPDIR); nil gives it none of them.
	Getenv func(string) string
	// Software names the bridge to the servers, e.g. "boxwire-bridge/0.1".
	Software string
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Host lists and calls the host tools. It is safe for concurrent use.
type Host struct {
	cfg      Config
	log      *slog.Logger
	redactor *policy.Redactor
	group    *mcpclient.Group // the servers' sessions
	servers  []*server
}

// New returns a Host for cfg. It starts nothing: each server is connected
// when a thread first lists or calls its tools.
func New(cfg Config) *Host {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Getenv == nil {
		cfg.Getenv = func(string) string { return "" }
	}
	secrets := slices.Clone(cfg.Secrets)
	h := &Host{cfg: cfg, log: cfg.Logger, group: mcpclient.NewGroup(errClosed)}
	for _, sc := range cfg.Servers {
		secrets = append(secrets, sc.secrets...)
		s := &server{h: h, cfg: sc, log: h.log.With("host_tool_server", sc.Name)}
		s.conn = h.group.Conn(mcpclient.ConnConfig{Dial: s.dial, RetryWait: retryWait, Logger: s.log})
		h.servers = append(h.servers, s)
	}
	h.redactor = policy.NewRedactor(secrets)
	return h
}

// Secrets returns every secret the host's servers were given (their
// environment and header values), for the bridge's other redaction.
func (h *Host) Secrets() []string {
	var out []string
	for _, s := range h.servers {
		out = append(out, s.cfg.secrets...)
	}
	return out
}

// Redact masks the secrets the host knows and the common key shapes in
// text; n counts the masks it put in.
func (h *Host) Redact(text string) (out string, n int) { return h.redact(text, Scope{}) }

// Tools returns the host tools offered in sc, sorted by name. A server
// that cannot be reached is left out and named in Errors. It blocks while
// servers are connected and listed (each at most mcpclient.ConnectWait)
// or until ctx ends.
func (h *Host) Tools(ctx context.Context, sc Scope) wire.HostTools {
	var out wire.HostTools
	for _, e := range h.offered(ctx, sc, &out.Errors) {
		out.Tools = append(out.Tools, e.def)
	}
	slices.SortFunc(out.Tools, func(a, b wire.HostTool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// entry is one offered tool: its definition and where it lives.
type entry struct {
	def  wire.HostTool
	srv  *server
	tool string // the server's own name for it
}

// offered lists the tools offered in sc, first server first: a name
// taken by an earlier server is skipped (and logged).
func (h *Host) offered(ctx context.Context, sc Scope, errs *[]string) []entry {
	var out []entry
	taken := map[string]bool{}
	for _, s := range h.servers {
		if !s.cfg.allows(sc) {
			continue
		}
		tools, err := s.conn.Tools(ctx)
		if err != nil {
			if errs != nil {
				*errs = append(*errs, h.redactor.Redact(fmt.Sprintf("%s: %v", s.cfg.Name, err)))
			}
			continue
		}
		for _, t := range tools {
			name := s.cfg.Prefix + t.Name
			if !s.cfg.offers(t.Name) {
				continue
			}
			if taken[name] {
				s.log.Warn("host tool name already taken by an earlier server; skipped", "tool", name)
				continue
			}
			taken[name] = true
			out = append(out, entry{def: toolDef(name, t), srv: s, tool: t.Name})
		}
	}
	return out
}

// toolDef is t as the agent offers it, named name.
func toolDef(name string, t mcpclient.Tool) wire.HostTool {
	return wire.HostTool{Name: name, Description: t.Description, InputSchema: mcpclient.Schema(t)}
}

// Call runs the host tool call.Name for sc and returns its result,
// redacted. progress, when not nil, gets the server's progress messages
// (redacted), from one goroutine at a time, and none after Call returned
// (a later one is dropped). It blocks until the tool is
// done, its timeout passes, or ctx ends — then the call is cancelled on
// the server.
func (h *Host) Call(ctx context.Context, sc Scope, call wire.HostCall, progress func(string)) wire.HostResult {
	var found *entry
	for _, e := range h.offered(ctx, sc, nil) {
		if e.def.Name == call.Name {
			found = &e
			break
		}
	}
	if found == nil {
		return wire.HostResult{Error: fmt.Sprintf("%q is not a host tool this thread may use", call.Name)}
	}
	args := map[string]any{}
	if len(call.Arguments) > 0 && string(call.Arguments) != "null" {
		if err := json.Unmarshal(call.Arguments, &args); err != nil {
			return wire.HostResult{Error: "the arguments are not a JSON object: " + err.Error()}
		}
	}
	var say func(string)
	if progress != nil {
		say = func(m string) { red, _ := h.redact(m, sc); progress(red) }
	}
	res := found.srv.call(ctx, found.tool, args, call.CallID, say)
	var n, k int
	res.Output, n = h.redact(res.Output, sc)
	res.Error, k = h.redact(res.Error, sc)
	res.Redacted = n + k
	return res
}

// redact masks the host's secrets, then the scope's, counting the masks.
func (h *Host) redact(text string, sc Scope) (string, int) {
	out := h.redactor.Redact(text)
	if sc.Redact != nil {
		out = sc.Redact(out)
	}
	return out, max(0, strings.Count(out, policy.Mask)-strings.Count(text, policy.Mask))
}

// Close ends every server's session (a stdio server's stdin is closed,
// then it is signalled) and waits for them. Later calls fail. It is
// idempotent.
func (h *Host) Close() error {
	h.group.Close()
	return nil
}

// errClosed is the error of a list or call after Close.
var errClosed = errors.New("the bridge is shutting down")

// server is one configured MCP server and its session.
type server struct {
	h    *Host
	cfg  ServerConfig
	log  *slog.Logger
	conn *mcpclient.Conn

	mu     sync.Mutex
	stderr *mcpclient.Tail // the last started command's last words

	calls    atomic.Uint64             // numbers the calls' progress tokens
	pmu      sync.Mutex                // progress only: the SDK's handlers take it
	progress map[string]*progressRelay // by progress token (call.go)
}

// dial starts or reaches the server and initializes a session with the
// MCP Go SDK (sdk.go).
func (s *server) dial(ctx context.Context, listChanged func()) (mcpclient.Session, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "boxwire-bridge", Version: s.h.cfg.Software}, &mcp.ClientOptions{
		Capabilities:                &mcp.ClientCapabilities{},
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { listChanged() },
		ProgressNotificationHandler: s.onProgress,
	})
	var (
		transport mcp.Transport
		stderr    *mcpclient.Tail
	)
	if len(s.cfg.Command) > 0 {
		cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
		cmd.Dir = s.cfg.Dir
		cmd.Env = s.env()
		stderr = &mcpclient.Tail{}
		cmd.Stderr = stderr
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: mcpclient.TerminateWait}
	} else {
		transport = &mcp.StreamableClientTransport{
			Endpoint:   s.cfg.URL,
			HTTPClient: &http.Client{Transport: headers{set: s.cfg.Headers, next: http.DefaultTransport}},
			MaxRetries: 1,
		}
	}
	sess, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("connect: %w%s", err, stderr.Words())
	}
	s.mu.Lock()
	s.stderr = stderr
	s.mu.Unlock()
	return &sdkSession{cs: sess}, nil
}

// env is a command's environment: a few of the bridge's variables, then
// the server's own.
func (s *server) env() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR"} {
		if v := s.h.cfg.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range s.cfg.Env {
		env = append(env, k+"="+v)
	}
	return env
}

// onProgress hands a progress notification to its call.
func (s *server) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	tok, _ := req.Params.ProgressToken.(string)
	s.pmu.Lock()
	r := s.progress[tok]
	s.pmu.Unlock()
	if r != nil && req.Params.Message != "" {
		r.send(req.Params.Message)
	}
}

// headers is an http.RoundTripper that sets a server's headers.
type headers struct {
	set  map[string]string
	next http.RoundTripper
}

// RoundTrip sets the headers on a clone of req.
func (h headers) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h.set {
		req.Header.Set(k, v)
	}
	return h.next.RoundTrip(req)
}
