package server

import (
	"context"
	"net/http"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/threadapi"
	"github.com/boxwire/boxwire/bridge/threadops"
	"github.com/boxwire/boxwire/bridge/wire"
)

// The threads HTTP API is bridge/threadapi's; threadsAPI is the server's
// threads as it sees them (threadapi.Threads). Describing threads and
// changing their sandboxes (list, get, egress rules, image) are
// bridge/threadops' (Server.ops, over liveThreads); creating and deleting
// them are here. Handler mounts the routes.

// threadsAPI answers bridge/threadapi for the server: all but Create and
// Delete are its Ops'.
type threadsAPI struct {
	*threadops.Ops
	s *Server
}

// httpError maps an error of making or resuming a thread to a status and
// the wire error a client is sent (threadops.WireError).
func httpError(err error) (int, wire.Error) {
	werr := threadops.WireError(err)
	return threadapi.Status(werr.Code), werr
}

// Create makes a thread (createThread) until the request or the server
// ends.
func (a threadsAPI) Create(ctx context.Context, req wire.CreateThread) (wire.ThreadInfo, error) {
	s := a.s
	cctx, cancel := s.untilClose(ctx)
	defer cancel()
	t, err := s.createThread(cctx, req)
	if err != nil {
		s.log.Warn("create thread", "err", err)
		return wire.ThreadInfo{}, threadops.WireError(err)
	}
	t.log.Info("thread created", "scope", t.box.Scope(), "box", t.box.ID())
	return a.Info(ctx, t), nil
}

// Delete removes thread id: a suspended one's record, log and volume
// (fleet.RemoveSuspended), a live one with removeThread (audited). It is
// carried out whole even when its client hangs up meanwhile, within
// deleteTimeout.
func (a threadsAPI) Delete(ctx context.Context, id, remote string) error {
	s := a.s
	t := s.lookup(id)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
	defer cancel()
	if _, ok := a.Suspended(dctx, id); t == nil && ok { // thread, log and volume
		return s.fleet.RemoveSuspended(dctx, id)
	}
	if t == nil {
		return threadapi.ErrNoThread
	}
	s.users.Record(ctx, "thread.delete", id, "", remote)
	if err := s.removeThread(dctx, t, wire.ErrorEnvelope(id, "", wire.CodeNotFound, "thread deleted")); err != nil {
		t.log.Error("remove thread", "err", err)
		return err
	}
	t.log.Info("thread deleted")
	return nil
}

// threadRoutes mounts the threads API (bridge/threadapi) and file
// transfers behind the users' guards: routes naming a thread answer 404
// for another user's (bridge/users).
func (s *Server) threadRoutes(mux *http.ServeMux) {
	u, api := s.users, threadapi.API{Threads: threadsAPI{s.ops, s}, Log: s.log}
	mux.Handle("POST /v1/threads", u.Auth(http.HandlerFunc(api.Create)))
	mux.Handle("GET /v1/threads", u.Auth(http.HandlerFunc(api.List)))
	// A thread another bridge relays is described, changed and deleted
	// there, and its files moved there (relayedHTTP, forwardhttp.go).
	mux.Handle("GET /v1/threads/{id}", u.Auth(u.Owned(s.relayedHTTP(http.HandlerFunc(api.Get)))))
	mux.Handle("DELETE /v1/threads/{id}", u.Auth(u.Owned(s.relayedHTTP(http.HandlerFunc(api.Delete)))))
	mux.Handle("PATCH /v1/threads/{id}", u.Auth(u.Owned(s.relayedHTTP(u.Audited("thread.update", http.HandlerFunc(api.Patch))))))
	mux.Handle("GET /v1/threads/{id}/events", u.Auth(u.Owned(u.Audited("thread.export", http.HandlerFunc(api.Export)))))
	mux.Handle(wire.ThreadFilesPath, u.Auth(u.Owned(s.relayedHTTP(u.Audited("", http.HandlerFunc(s.serveFiles)))))) // files.go
}

var _ threadapi.Threads = threadsAPI{}

// Box is the sandbox the thread runs in, and Created when it was made
// (threadops.Thread).
func (t *thread) Box() *fleet.Box    { return t.box }
func (t *thread) Created() time.Time { return t.created }

// Clients is how many clients are attached (threadops.Thread).
func (t *thread) Clients() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.clients)
}

// liveThreads is the server's live threads as bridge/threadops sees them
// (threadops.Threads).
type liveThreads struct{ s *Server }

// Lookup returns live thread id.
func (l liveThreads) Lookup(id string) (threadops.Thread, bool) {
	if t := l.s.lookup(id); t != nil {
		return t, true
	}
	return nil, false
}

// Live returns every live thread.
func (l liveThreads) Live() []threadops.Thread {
	var out []threadops.Thread
	for _, t := range l.s.liveThreads() {
		out = append(out, t)
	}
	return out
}
