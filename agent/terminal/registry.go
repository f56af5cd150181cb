package terminal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/boxwire/boxwire/agent/shell"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Defaults for zero Config fields.
const (
	DefaultIdleTimeout = 30 * time.Minute
	DefaultStallLimit  = 10 * time.Second
	DefaultLagGrace    = time.Second
)

// inherited names the agent's environment variables a terminal inherits;
// nothing else of the agent's environment (no key, no token) reaches it.
var inherited = []string{"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "USER", "LOGNAME", "SHELL", "TZ", "TMPDIR"}

// Config configures a Registry. Zero values mean defaults.
type Config struct {
	// Dir is the working directory of new sessions (default the agent's).
	Dir string
	// Shell is the default command; default $SHELL -l, else /bin/bash -l.
	Shell []string
	// Env is laid over the inherited variables and TERM=xterm-256color for
	// every session, before the session's own.
	Env []string
	// IdleTimeout closes a session that has had no watcher, input or
	// output for this long.
	IdleTimeout time.Duration
	// StallLimit is how long output waits for watchers that are all full
	// before they are detached; LagGrace how long a full watcher may lag
	// behind one that keeps up.
	StallLimit, LagGrace time.Duration
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// ErrNotFound is returned for an unknown session id.
var ErrNotFound = errors.New("no such terminal session")

// ErrClosed is returned by Open after Close.
var ErrClosed = errors.New("terminal registry closed")

// Registry holds the agent's sessions. It is safe for concurrent use; Close
// ends every session and waits for every goroutine it started.
type Registry struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	sessions map[string]*Session
	next     int
	closed   bool
}

// New returns a Registry and starts its idle reaper.
func New(cfg Config) *Registry {
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.StallLimit <= 0 {
		cfg.StallLimit = DefaultStallLimit
	}
	if cfg.LagGrace <= 0 {
		cfg.LagGrace = DefaultLagGrace
	}
	if len(cfg.Shell) == 0 {
		cfg.Shell = defaultShell()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Registry{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel, sessions: map[string]*Session{}}
	r.wg.Add(1)
	go r.reap()
	return r
}

func defaultShell() []string {
	if sh := os.Getenv("SHELL"); sh != "" {
		return []string{sh, "-l"}
	}
	if _, err := os.Stat("/bin/bash"); err == nil {
		return []string{"/bin/bash", "-l"}
	}
	return []string{"/bin/sh", "-l"}
}

// Open starts a session for o (see wire.TerminalOpen for the defaults). It
// returns once the process runs. A non-nil opener watches it from its first
// byte: it gets the terminal_attached answer (with id) before the process
// can print anything, then every byte of output. With a nil opener nobody
// watches it yet (see Attach).
func (r *Registry) Open(o wire.TerminalOpen, opener Sink, id string) (*Session, error) {
	cmd := o.Command
	if len(cmd) == 0 {
		cmd = r.cfg.Shell
	}
	cols, rows := o.Cols, o.Rows
	if cols == 0 {
		cols = shell.DefaultCols
	}
	if rows == 0 {
		rows = shell.DefaultRows
	}
	dir := o.Dir
	if dir == "" {
		dir = r.cfg.Dir
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	r.next++
	sid := "term_" + strconv.Itoa(r.next)
	r.mu.Unlock()

	s := &Session{
		id: sid, r: r, command: cmd, scr: newScreen(cols, rows),
		sinks: map[Sink]struct{}{}, cols: cols, rows: rows, active: time.Now(),
		done: make(chan struct{}), drained: make(chan struct{}),
	}
	s.fan.StallLimit, s.fan.LagGrace = r.cfg.StallLimit, r.cfg.LagGrace
	// Output waits for outMu until the opener watches: no byte goes to
	// nobody.
	s.outMu.Lock()
	proc, err := shell.Start(r.ctx, shell.Spec{
		Command: cmd, Dir: dir, Env: r.env(o.Env), Cols: cols, Rows: rows, Output: output{s},
	})
	if err != nil {
		s.outMu.Unlock()
		return nil, fmt.Errorf("open terminal: %w", err)
	}
	s.proc = proc
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		s.outMu.Unlock()
		_ = proc.Close()
		return nil, ErrClosed
	}
	r.sessions[sid] = s
	r.wg.Add(2)
	r.mu.Unlock()
	if opener != nil {
		s.attachLocked(opener, id)
	}
	s.outMu.Unlock()
	go s.wait()
	go func() {
		defer r.wg.Done()
		s.scr.run(s.drained)
		<-s.drained
	}()
	r.log.Info("terminal opened", "session", sid, "command", cmd, "cols", cols, "rows", rows)
	return s, nil
}

// env builds a session's environment from scratch.
func (r *Registry) env(extra map[string]string) []string {
	vars := map[string]string{"TERM": "xterm-256color"}
	for _, name := range inherited {
		if v, ok := os.LookupEnv(name); ok {
			vars[name] = v
		}
	}
	for _, kv := range r.cfg.Env {
		if k, v, ok := cutEnv(kv); ok {
			vars[k] = v
		}
	}
	maps.Copy(vars, extra)
	env := make([]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return env
}

func cutEnv(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], i > 0
		}
	}
	return "", "", false
}

// Get returns the session with id.
func (r *Registry) Get(id string) (*Session, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sessions[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return s, nil
}

// List describes every session, oldest first.
func (r *Registry) List() []wire.TerminalInfo {
	r.mu.Lock()
	all := slices.Collect(maps.Values(r.sessions))
	r.mu.Unlock()
	infos := make([]wire.TerminalInfo, 0, len(all))
	for _, s := range all {
		infos = append(infos, s.Info())
	}
	slices.SortFunc(infos, func(a, b wire.TerminalInfo) int { return sessionNumber(a.Session) - sessionNumber(b.Session) })
	return infos
}

func sessionNumber(id string) int {
	n, _ := strconv.Atoi(id[len("term_"):])
	return n
}

// CloseSession ends the session with id (see Session.close); its watchers
// get terminal_exit.
func (r *Registry) CloseSession(id string) error {
	s, err := r.Get(id)
	if err != nil {
		return err
	}
	return s.close()
}

// DetachAll detaches k from every session (its connection ended).
func (r *Registry) DetachAll(k Sink) {
	r.mu.Lock()
	all := slices.Collect(maps.Values(r.sessions))
	r.mu.Unlock()
	for _, s := range all {
		s.Detach(k)
	}
}

func (r *Registry) remove(s *Session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions[s.id] == s {
		delete(r.sessions, s.id)
	}
}

// reap closes idle sessions until the registry closes.
func (r *Registry) reap() {
	defer r.wg.Done()
	tick := time.NewTicker(min(r.cfg.IdleTimeout/4, 30*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case now := <-tick.C:
			for _, s := range r.idle(now) {
				r.log.Info("terminal idle; closing", "session", s.id, "idle_timeout", r.cfg.IdleTimeout)
				_ = s.close()
			}
		}
	}
}

func (r *Registry) idle(now time.Time) []*Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*Session
	for _, s := range r.sessions {
		s.mu.Lock()
		if len(s.sinks) == 0 && now.Sub(s.active) >= r.cfg.IdleTimeout {
			out = append(out, s)
		}
		s.mu.Unlock()
	}
	return out
}

// Close ends every session and waits for every goroutine of the registry.
// It is idempotent.
func (r *Registry) Close() {
	r.mu.Lock()
	r.closed = true
	all := slices.Collect(maps.Values(r.sessions))
	r.mu.Unlock()
	r.cancel()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(func() { _ = s.close() })
	}
	wg.Wait()
	r.wg.Wait()
}
