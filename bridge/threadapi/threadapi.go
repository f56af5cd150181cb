// Package threadapi is the threads HTTP API (the README's "Threads API",
// docs/lifecycle.md, docs/egress-thread.md): POST and GET /v1/threads,
// GET, PATCH and DELETE /v1/threads/{id}, and GET /v1/threads/{id}/events,
// the export. It reads requests, checks their bodies and answers with
// JSON (errors as {"error": {"code", "message"}}, their status from the
// wire code: Status); what a thread is and does stays with the server,
// behind the Threads interface.
//
// The server makes an [API] over its threads and mounts each handler
// behind its own guards (authentication, ownership, audit: bridge/users).
// It imports only the bridge's HTTP answers and wire; never the server.
package threadapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/wire"
)

// MaxBody bounds the body of POST /v1/threads and PATCH /v1/threads/{id}.
const MaxBody = 64 << 10

// exportBatch is how many events the export reads from the store at a
// time.
const exportBatch = 256

// ErrNoThread is a Threads method's error for a thread that does not
// exist (or no longer does).
var ErrNoThread = errors.New("no such thread")

// Threads is what the API needs of the server's threads. Its methods are
// called with the request's context, which carries who asks (bridge/users);
// they must be safe for concurrent use.
type Threads interface {
	// Create makes a thread for req and describes it once its agent is
	// ready. Its errors are wire.Errors (their code gives the status).
	Create(ctx context.Context, req wire.CreateThread) (wire.ThreadInfo, error)
	// List describes the threads the caller may see, live and suspended,
	// of owner ("" any), oldest first.
	List(ctx context.Context, owner string) []wire.ThreadInfo
	// Get describes thread id, or fails with ErrNoThread.
	Get(ctx context.Context, id string) (wire.ThreadInfo, error)
	// Delete removes thread id, whole even when ctx ends meanwhile; it
	// fails with ErrNoThread when there is none.
	Delete(ctx context.Context, id, remote string) error
	// Known reports whether thread id is live or stored; err is the
	// store's, when it could not say.
	Known(ctx context.Context, id string) (ok bool, err error)
	// MoveImage moves thread id's sandbox to image. Refusals are
	// wire.Errors; ErrNoThread when it is gone.
	MoveImage(ctx context.Context, id, image string) (wire.ThreadInfo, error)
	// ThreadEgress checks the egress rules a thread asks for and returns
	// them canonical; refusals are wire.Errors.
	ThreadEgress(rules []string) ([]string, error)
	// SetEgress gives thread id's sandbox the canonical rules;
	// ErrNoThread when it is gone.
	SetEgress(ctx context.Context, id string, rules []string) (wire.ThreadInfo, error)
	// Flush waits until every event queued for the store is stored;
	// Events then returns up to limit stored events of thread id with seq
	// > after, oldest first.
	Flush()
	Events(id string, after uint64, limit int) ([]wire.Envelope, error)
}

// API serves the threads routes over Threads; Log is required.
type API struct {
	Threads Threads
	Log     *slog.Logger
}

// Status is the HTTP status of an error answer with code.
func Status(code wire.Code) int {
	switch code {
	case wire.CodeNotAllowed, wire.CodeBadMessage:
		return http.StatusBadRequest
	case wire.CodeSandboxLimit, wire.CodeQuotaExceeded:
		return http.StatusTooManyRequests
	case wire.CodeEngineUnavailable, wire.CodeInternal:
		return http.StatusServiceUnavailable
	}
	return http.StatusBadGateway
}

// writeError answers err: a wire.Error with its code's status, anything
// else as a sandbox that could not start (502).
func writeError(w http.ResponseWriter, err error) {
	var werr wire.Error
	if !errors.As(err, &werr) {
		werr = wire.Error{Code: wire.CodeSandboxUnavailable, Message: "could not start a sandbox: " + err.Error()}
	}
	httpjson.Error(w, Status(werr.Code), werr.Code, werr.Message)
}

// Create answers POST /v1/threads: 201 with the new thread's ThreadInfo
// once its agent is ready.
func (a API) Create(w http.ResponseWriter, r *http.Request) {
	var req wire.CreateThread
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody))
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, wire.CodeBadMessage, "body: "+err.Error())
		return
	}
	info, err := a.Threads.Create(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	httpjson.Write(w, http.StatusCreated, info)
}

// List answers GET /v1/threads[?owner=NAME]: the threads the caller may
// see, oldest first.
func (a API) List(w http.ResponseWriter, r *http.Request) {
	httpjson.Write(w, http.StatusOK, wire.ThreadList{Threads: a.Threads.List(r.Context(), r.URL.Query().Get("owner"))})
}

// Get answers GET /v1/threads/{id}.
func (a API) Get(w http.ResponseWriter, r *http.Request) {
	info, err := a.Threads.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		httpjson.NotFound(w, r.PathValue("id"))
		return
	}
	httpjson.Write(w, http.StatusOK, info)
}

// Delete answers DELETE /v1/threads/{id}: 204 once the thread (in thread
// scope with its sandbox, workspace volume, proxies and folder) is gone.
func (a API) Delete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	switch err := a.Threads.Delete(r.Context(), id, r.RemoteAddr); {
	case errors.Is(err, ErrNoThread):
		httpjson.NotFound(w, id)
	case err != nil:
		httpjson.Error(w, http.StatusInternalServerError, wire.CodeInternal, err.Error())
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}
