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
)

// Limits of the host's MCP traffic.
const (
	// connectWait bounds starting or reaching a server and its
	// initialization handshake.
	connectWait = 30 * time.Second
	// listFresh is how long a server's tool list is used before it is
	// asked again (a tools/list_changed notification drops it at once).
	listFresh = time.Minute
	// MaxResultBytes caps a result's output so that it fits a wire frame
	// with room to spare; the rest is cut with a note.
	MaxResultBytes = 512 << 10
	// terminateWait is how long a stdio server has to exit after its
	// stdin closes before it is signalled.
	terminateWait = 2 * time.Second
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
	servers  []*server

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // session watchers (server.watch)
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
	h := &Host{cfg: cfg, log: cfg.Logger}
	for _, sc := range cfg.Servers {
		secrets = append(secrets, sc.secrets...)
		h.servers = append(h.servers, &server{h: h, cfg: sc, log: h.log.With("host_tool_server", sc.Name)})
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
// servers are connected and listed (each at most connectWait) or until
// ctx ends.
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
		tools, err := s.list(ctx)
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
func toolDef(name string, t *mcp.Tool) wire.HostTool {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || string(schema) == "null" {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	return wire.HostTool{Name: name, Description: t.Description, InputSchema: schema}
}

// Call runs the host tool call.Name for sc and returns its result,
// redacted. progress, when not nil, gets the server's progress messages
// (redacted), from one goroutine at a time. It blocks until the tool is
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
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	for _, s := range h.servers {
		s.drop(nil)
	}
	h.wg.Wait()
	return nil
}

// errClosed is the error of a list or call after Close.
var errClosed = errors.New("the bridge is shutting down")

// server is one configured MCP server and its live session, if any.
type server struct {
	h   *Host
	cfg ServerConfig
	log *slog.Logger

	mu     sync.Mutex
	sess   *mcp.ClientSession
	ended  chan struct{} // closed when sess has ended (watch)
	stderr *tail         // the command's last words
	tools  []*mcp.Tool
	listed time.Time
	stale  atomic.Bool // tools/list_changed came: list again
	failed time.Time   // when the last connect failed
	err    error       // and why

	pmu      sync.Mutex              // progress only: the SDK's handlers take it
	progress map[string]func(string) // by progress token (the call id)
}

// session returns the live session, connecting first when there is none.
func (s *server) session(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		return s.sess, nil
	}
	s.h.mu.Lock()
	closed := s.h.closed
	if !closed {
		s.h.wg.Add(1) // for watch
	}
	s.h.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	if since := time.Since(s.failed); s.err != nil && since < retryWait {
		s.h.wg.Done()
		return nil, fmt.Errorf("%w (tried %s ago; again after %s)", s.err, since.Round(time.Second), retryWait)
	}
	sess, stderr, err := s.connect(ctx)
	if err != nil {
		s.h.wg.Done()
		if ctx.Err() == nil { // not the caller giving up
			s.failed, s.err = time.Now(), err
		}
		return nil, err
	}
	s.err = nil
	s.sess, s.stderr, s.tools, s.ended = sess, stderr, nil, make(chan struct{})
	go s.watch(sess, s.ended)
	s.log.Info("host tool server connected")
	return sess, nil
}

// connect starts or reaches the server and initializes a session.
func (s *server) connect(ctx context.Context) (*mcp.ClientSession, *tail, error) {
	cctx, cancel := context.WithTimeout(ctx, connectWait)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "boxwire-bridge", Version: s.h.cfg.Software}, &mcp.ClientOptions{
		Capabilities:                &mcp.ClientCapabilities{},
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { s.forgetList() },
		ProgressNotificationHandler: s.onProgress,
	})
	var (
		transport mcp.Transport
		stderr    *tail
	)
	if len(s.cfg.Command) > 0 {
		cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
		cmd.Dir = s.cfg.Dir
		cmd.Env = s.env()
		stderr = &tail{}
		cmd.Stderr = stderr
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: terminateWait}
	} else {
		transport = &mcp.StreamableClientTransport{
			Endpoint:   s.cfg.URL,
			HTTPClient: &http.Client{Transport: headers{set: s.cfg.Headers, next: http.DefaultTransport}},
			MaxRetries: 1,
		}
	}
	sess, err := client.Connect(cctx, transport, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w%s", err, stderr.words())
	}
	return sess, stderr, nil
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

// watch waits for sess to end (the process exited, the server hung up)
// and forgets it, so that the next use connects again.
func (s *server) watch(sess *mcp.ClientSession, ended chan struct{}) {
	defer s.h.wg.Done()
	err := sess.Wait()
	_ = sess.Close() // releases what the session still holds (its listen)
	close(ended)
	s.mu.Lock()
	if s.sess == sess {
		s.sess, s.tools = nil, nil
	}
	s.mu.Unlock()
	s.log.Info("host tool server session ended", "err", err)
}

// drop closes the session if it is sess (any when sess is nil).
func (s *server) drop(sess *mcp.ClientSession) {
	s.mu.Lock()
	cur := s.sess
	if cur == nil || (sess != nil && cur != sess) {
		s.mu.Unlock()
		return
	}
	s.sess, s.tools = nil, nil
	s.mu.Unlock()
	_ = cur.Close()
}

// list returns the server's tools, asking it when the list is stale.
func (s *server) list(ctx context.Context) ([]*mcp.Tool, error) {
	sess, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.sess == sess && s.tools != nil && time.Since(s.listed) < listFresh && !s.stale.Swap(false) {
		tools := s.tools
		s.mu.Unlock()
		return tools, nil
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

// forgetList marks the cached tool list stale (tools/list_changed).
func (s *server) forgetList() { s.stale.Store(true) }

// onProgress hands a progress notification to its call.
func (s *server) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	tok, _ := req.Params.ProgressToken.(string)
	s.pmu.Lock()
	say := s.progress[tok]
	s.pmu.Unlock()
	if say != nil && req.Params.Message != "" {
		say(req.Params.Message)
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
