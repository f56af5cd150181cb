package server

import (
	"context"
	"net/http"
	"sort"

	"github.com/boxwire/boxwire/bridge/threadapi"
	"github.com/boxwire/boxwire/bridge/users"
	"github.com/boxwire/boxwire/bridge/wire"
)

// The threads HTTP API is bridge/threadapi's; threadsAPI is the server's
// threads as it sees them (threadapi.Threads). Handler mounts its routes.

// threadsAPI answers bridge/threadapi for the server.
type threadsAPI struct{ s *Server }

// httpError maps an error of making or resuming a thread to a status and
// the wire error a client is sent.
func httpError(err error) (int, wire.Error) {
	werr := wireError(err)
	return threadapi.Status(werr.Code), werr
}

// wireError is err as the wire error a client is sent (errorFor).
func wireError(err error) wire.Error {
	var werr wire.Error
	_ = errorFor("", "", err).Decode(&werr)
	return werr
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
		return wire.ThreadInfo{}, wireError(err)
	}
	t.log.Info("thread created", "scope", t.box.Scope(), "box", t.box.ID())
	return s.info(ctx, t), nil
}

// List describes every live and suspended thread the caller may see.
func (a threadsAPI) List(ctx context.Context, owner string) []wire.ThreadInfo {
	s := a.s
	s.mu.Lock()
	threads := make([]*thread, 0, len(s.threads))
	for _, t := range s.threads {
		threads = append(threads, t)
	}
	s.mu.Unlock()
	list := []wire.ThreadInfo{}
	for _, t := range threads {
		list = append(list, s.info(ctx, t))
	}
	list = append(list, s.suspendedInfos(ctx)...) // suspend.go
	list = s.users.Filter(ctx, list, owner)       // bridge/users
	sort.Slice(list, func(i, j int) bool { return list[i].Created.Before(list[j].Created) })
	return list
}

// Get describes thread id, live or suspended.
func (a threadsAPI) Get(ctx context.Context, id string) (wire.ThreadInfo, error) {
	s := a.s
	t := s.lookup(id)
	if rec, ok := s.suspendedRecord(ctx, id); t == nil && ok { // suspend.go
		info := s.suspendedInfo(rec)
		info.Owner = users.OwnerName(rec.Owner)
		return info, nil
	}
	if t == nil {
		return wire.ThreadInfo{}, threadapi.ErrNoThread
	}
	return s.info(ctx, t), nil
}

// Delete removes thread id: a suspended one's record, log and volume, a
// live one with removeThread (audited). It is carried out whole even when
// its client hangs up meanwhile, within deleteTimeout.
func (a threadsAPI) Delete(ctx context.Context, id, remote string) error {
	s := a.s
	t := s.lookup(id)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
	defer cancel()
	if _, ok := s.suspendedRecord(dctx, id); t == nil && ok { // suspend.go: thread, log and volume
		return s.removeSuspended(dctx, id)
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

// Known reports whether thread id has a record or is live.
func (a threadsAPI) Known(ctx context.Context, id string) (bool, error) {
	_, ok, err := a.s.cfg.Store.Get(ctx, id)
	return ok || a.s.lookup(id) != nil, err
}

// MoveImage moves thread id to image (moveImage, rollout_api.go) until the
// request or the server ends.
func (a threadsAPI) MoveImage(ctx context.Context, id, image string) (wire.ThreadInfo, error) {
	ctx, cancel := a.s.untilClose(ctx)
	defer cancel()
	return a.s.moveImage(ctx, id, image)
}

// ThreadEgress checks a thread's egress rules (fleet.ThreadEgress).
func (a threadsAPI) ThreadEgress(rules []string) ([]string, error) {
	canon, err := a.s.fleet.ThreadEgress(rules)
	if err != nil {
		return nil, wireError(err)
	}
	return canon, nil
}

// SetEgress sets thread id's sandbox's rules (setEgress, egress_update.go)
// until the request or the server ends.
func (a threadsAPI) SetEgress(ctx context.Context, id string, rules []string) (wire.ThreadInfo, error) {
	ctx, cancel := a.s.untilClose(ctx)
	defer cancel()
	return a.s.setEgress(ctx, id, rules, wire.EgressByAPI)
}

// Flush waits for the store's queued appends.
func (a threadsAPI) Flush() { a.s.db.Flush() }

// Events reads thread id's stored events.
func (a threadsAPI) Events(id string, after uint64, limit int) ([]wire.Envelope, error) {
	return a.s.db.Events(id, after, limit)
}

// threadRoutes mounts the threads API (bridge/threadapi) and file
// transfers behind the users' guards: routes naming a thread answer 404
// for another user's (bridge/users).
func (s *Server) threadRoutes(mux *http.ServeMux) {
	u, api := s.users, threadapi.API{Threads: threadsAPI{s}, Log: s.log}
	mux.Handle("POST /v1/threads", u.Auth(http.HandlerFunc(api.Create)))
	mux.Handle("GET /v1/threads", u.Auth(http.HandlerFunc(api.List)))
	mux.Handle("GET /v1/threads/{id}", u.Auth(u.Owned(http.HandlerFunc(api.Get))))
	mux.Handle("DELETE /v1/threads/{id}", u.Auth(u.Owned(http.HandlerFunc(api.Delete))))
	mux.Handle("PATCH /v1/threads/{id}", u.Auth(u.Owned(u.Audited("thread.update", http.HandlerFunc(api.Patch)))))
	mux.Handle("GET /v1/threads/{id}/events", u.Auth(u.Owned(u.Audited("thread.export", http.HandlerFunc(api.Export)))))
	mux.Handle(wire.ThreadFilesPath, u.Auth(u.Owned(u.Audited("", http.HandlerFunc(s.serveFiles))))) // files.go
}

var _ threadapi.Threads = threadsAPI{}

// errNoThread: an update named a thread the bridge does not know.
var errNoThread = threadapi.ErrNoThread
