package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/users"
	"github.com/boxwire/boxwire/bridge/wire"
)

// maxCreateBody bounds the body of POST /v1/threads.
const maxCreateBody = 64 << 10

// lifecycleDefaults fills the lifecycle fields of cfg.
func lifecycleDefaults(cfg Config) Config {
	if cfg.IdleTTL <= 0 {
		cfg.IdleTTL = DefaultIdleTTL
	}
	if cfg.MaxLifetime <= 0 {
		cfg.MaxLifetime = DefaultMaxLifetime
	}
	if cfg.ReapInterval <= 0 {
		cfg.ReapInterval = min(30*time.Second, cfg.IdleTTL/4)
	}
	cfg.ReapInterval = max(cfg.ReapInterval, 50*time.Millisecond)
	if cfg.ThreadTTL <= 0 {
		cfg.ThreadTTL = DefaultThreadTTL
	}
	if cfg.RecycleGrace <= 0 {
		cfg.RecycleGrace = DefaultRecycleGrace
	}
	if cfg.PoolIdle <= 0 {
		cfg.PoolIdle = DefaultPoolIdle
	}
	if cfg.Store == nil {
		cfg.Store = NewMemStore()
	}
	return cfg
}

// postThread creates a thread and its sandbox (POST /v1/threads) and
// answers 201 with its ThreadInfo once its agent is ready.
func (s *Server) postThread(w http.ResponseWriter, r *http.Request) {
	var req wire.CreateThread
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCreateBody))
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, wire.CodeBadMessage, "body: "+err.Error())
		return
	}
	ctx, cancel := s.untilClose(r.Context())
	defer cancel()
	t, err := s.createThread(ctx, req)
	if err != nil {
		s.log.Warn("create thread", "err", err)
		status, env := httpError(err)
		httpjson.Error(w, status, env.Code, env.Message)
		return
	}
	t.log.Info("thread created", "scope", t.box.Scope(), "box", t.box.ID())
	httpjson.Write(w, http.StatusCreated, s.info(r.Context(), t))
}

// httpError maps a creation error to a status and a wire error.
func httpError(err error) (int, wire.Error) {
	env := errorFor("", "", err)
	var werr wire.Error
	_ = env.Decode(&werr)
	switch werr.Code {
	case wire.CodeNotAllowed, wire.CodeBadMessage:
		return http.StatusBadRequest, werr
	case wire.CodeSandboxLimit, wire.CodeQuotaExceeded:
		return http.StatusTooManyRequests, werr
	case wire.CodeEngineUnavailable, wire.CodeInternal:
		return http.StatusServiceUnavailable, werr
	}
	return http.StatusBadGateway, werr
}

// listThreads answers GET /v1/threads with every live thread, oldest first.
func (s *Server) listThreads(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	threads := make([]*thread, 0, len(s.threads))
	for _, t := range s.threads {
		threads = append(threads, t)
	}
	s.mu.Unlock()
	list := wire.ThreadList{Threads: []wire.ThreadInfo{}}
	for _, t := range threads {
		list.Threads = append(list.Threads, s.info(r.Context(), t))
	}
	list.Threads = append(list.Threads, s.suspendedInfos(r.Context())...)                // suspend.go
	list.Threads = s.users.Filter(r.Context(), list.Threads, r.URL.Query().Get("owner")) // bridge/users
	sort.Slice(list.Threads, func(i, j int) bool { return list.Threads[i].Created.Before(list.Threads[j].Created) })
	httpjson.Write(w, http.StatusOK, list)
}

// getThread answers GET /v1/threads/{id}.
func (s *Server) getThread(w http.ResponseWriter, r *http.Request) {
	t := s.lookup(r.PathValue("id"))
	if rec, ok := s.suspendedRecord(r.Context(), r.PathValue("id")); t == nil && ok { // suspend.go
		info := s.suspendedInfo(rec)
		info.Owner = users.OwnerName(rec.Owner)
		httpjson.Write(w, http.StatusOK, info)
		return
	}
	if t == nil {
		httpjson.NotFound(w, r.PathValue("id"))
		return
	}
	httpjson.Write(w, http.StatusOK, s.info(r.Context(), t))
}

// info describes t, asking the engine whether its sandbox runs.
func (s *Server) info(ctx context.Context, t *thread) wire.ThreadInfo {
	b := t.box
	st := s.fleet.Status(b) // recycling changes the lifetime and image id
	t.mu.Lock()
	n := len(t.clients)
	t.mu.Unlock()
	status := wire.SandboxRunning
	ctx, cancel := context.WithTimeout(ctx, inspectWait)
	defer cancel()
	sandboxID := b.SandboxID()
	if sb, err := s.cfg.Manager.Inspect(ctx, sandboxID); err != nil || !sb.Running {
		status = wire.SandboxExitedStatus
	}
	return wire.ThreadInfo{
		ID: t.id, Scope: b.Scope(), Assistant: b.Assistant(), Image: b.Image(), Runtime: b.Runtime(),
		Status: status, SandboxID: sandboxID, Created: t.created, Expires: st.Expires, ImageID: st.ImageID,
		IdleExpires: st.IdleExpires, Clients: n, Egress: st.Egress, Owner: s.users.OwnerOf(ctx, t.id),
		AgentVersion: st.Agent.Version, AgentHash: st.Agent.Hash,
	}
}

// deleteThread removes a thread (DELETE /v1/threads/{id}); in thread scope
// its sandbox, workspace volume, proxy and folder go with it, in assistant
// scope the shared sandbox stays until its TTL.
func (s *Server) deleteThread(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	t := s.lookup(id)
	// A delete, once asked, is carried out whole: a client that hangs up
	// meanwhile must not leave a sandbox or volume half removed.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), deleteTimeout)
	defer cancel()
	if _, ok := s.suspendedRecord(ctx, id); t == nil && ok { // suspend.go: thread, log and volume
		if err := s.removeSuspended(ctx, id); err != nil {
			httpjson.Error(w, http.StatusInternalServerError, wire.CodeInternal, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if t == nil {
		httpjson.NotFound(w, id)
		return
	}
	s.users.Record(r.Context(), "thread.delete", id, "", r.RemoteAddr)
	if err := s.removeThread(ctx, t, wire.ErrorEnvelope(id, "", wire.CodeNotFound, "thread deleted")); err != nil {
		t.log.Error("remove thread", "err", err)
		httpjson.Error(w, http.StatusInternalServerError, wire.CodeInternal, err.Error())
		return
	}
	t.log.Info("thread deleted")
	w.WriteHeader(http.StatusNoContent)
}

// deleteTimeout bounds carrying out one DELETE of a thread, whether or not
// its client waits (the engine retries removals under load).
const deleteTimeout = 2 * time.Minute

// removeThread detaches t from the server and its box, closes its clients
// with final, forgets its record and, when t owned its box alone (thread
// scope), removes the sandbox and everything that goes with it. A thread
// already removed is not an error.
func (s *Server) removeThread(ctx context.Context, t *thread, final wire.Envelope) error {
	s.mu.Lock()
	if s.threads[t.id] == t {
		delete(s.threads, t.id)
	}
	own := s.fleet.Release(t.box, t.id)
	s.mu.Unlock()
	t.shutdown(final)
	err := s.cfg.Store.Delete(ctx, t.id)
	if own {
		err = errors.Join(err, s.fleet.Remove(ctx, t.box))
	}
	return err
}

// exitEvent describes a stopped sandbox for its clients (fleet.ExitEvent).
func exitEvent(sb sandbox.Sandbox) wire.SandboxExited { return fleet.ExitEvent(sb) }

// Of a dead sandbox's log the bridge reads the last exitLogRead lines and
// logs exitLogLines of them: from the start of a Go crash report ("panic:",
// "fatal error:", "runtime: ..."), whose first lines say why, or else the
// last ones.
const (
	exitLogRead  = 400
	exitLogLines = 30
)

// logExit tells the operator why sb stopped: msg and what its agent wrote
// last (a panic, a Go runtime's fatal error), which clients are not sent.
// It blocks for at most inspectWait.
func (t *thread) logExit(sb sandbox.Sandbox, msg string) {
	ctx, cancel := context.WithTimeout(context.Background(), inspectWait)
	defer cancel()
	tail, err := t.mgr.Logs(ctx, sb.ID, exitLogRead)
	if err != nil {
		t.log.Warn("sandbox stopped", "sandbox", sb.ID, "reason", msg, "logs_err", err)
		return
	}
	t.log.Warn("sandbox stopped", "sandbox", sb.ID, "reason", msg, "agent_log", crashLines(tail, exitLogLines))
}

// crashLines returns n lines of log: from the first line that starts a Go
// crash report, else the last n.
func crashLines(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") ||
			strings.HasPrefix(l, "runtime: ") || strings.HasPrefix(l, "runtime/cgo: ") {
			return strings.Join(lines[i:min(i+n, len(lines))], "\n")
		}
	}
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
