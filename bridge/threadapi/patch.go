package threadapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Patch answers PATCH /v1/threads/{id}: {"egress": [...]} replaces the
// thread's sandbox's own egress rules (an empty list removes them),
// checked as on creation (Threads.ThreadEgress); {"image": "..."} moves
// the thread's sandbox to another allowed image, keeping workspace and
// conversation; a body may carry both (the image first). It answers 200
// with the thread's ThreadInfo, 400 for a body, rules or an image it
// refuses, 404 for an unknown thread. It blocks while the thread is being
// resumed or its sandbox suspended.
func (a API) Patch(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req struct {
		Egress *[]string `json:"egress"` // wire.UpdateThread, with "missing" told from "empty"
		Image  *string   `json:"image"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	switch {
	case err != nil:
	case req.Egress == nil && req.Image == nil:
		err = errors.New(`egress is required, or image (an empty egress list removes the thread's rules)`)
	case req.Image != nil && *req.Image == "":
		err = errors.New("image must name an allowed image")
	}
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, wire.CodeBadMessage, "body: "+err.Error())
		return
	}
	if known, _ := a.Threads.Known(r.Context(), id); !known {
		httpjson.NotFound(w, id)
		return
	}
	if req.Image != nil {
		info, err := a.Threads.MoveImage(r.Context(), id, *req.Image)
		if err != nil {
			a.writeMoveError(w, id, err)
			return
		}
		if req.Egress == nil {
			httpjson.Write(w, http.StatusOK, info)
			return
		}
	}
	rules, err := a.Threads.ThreadEgress(*req.Egress)
	if err != nil {
		writeError(w, err)
		return
	}
	info, err := a.Threads.SetEgress(r.Context(), id, rules)
	switch {
	case errors.Is(err, ErrNoThread):
		httpjson.NotFound(w, id)
	case err != nil:
		a.Log.Error("change egress rules", "thread", id, "err", err)
		httpjson.Error(w, http.StatusInternalServerError, wire.CodeInternal, err.Error())
	default:
		httpjson.Write(w, http.StatusOK, info)
	}
}

// writeMoveError answers a refused or failed MoveImage.
func (a API) writeMoveError(w http.ResponseWriter, id string, err error) {
	var werr wire.Error
	switch {
	case errors.Is(err, ErrNoThread):
		httpjson.NotFound(w, id)
	case errors.As(err, &werr):
		writeError(w, werr)
	default:
		a.Log.Error("change thread image", "thread", id, "err", err)
		httpjson.Error(w, http.StatusInternalServerError, wire.CodeInternal, err.Error())
	}
}

// Export answers GET /v1/threads/{id}/events?after=N: the thread's stored
// events with seq > N (default 0) as JSON lines (application/x-ndjson),
// oldest first, read from the store page by page. A thread the store no
// longer knows is 404.
func (a API) Export(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after, err := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	if r.URL.Query().Get("after") == "" {
		after, err = 0, nil
	}
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, wire.CodeBadMessage, "after must be a seq number")
		return
	}
	if known, err := a.Threads.Known(r.Context(), id); err != nil || !known {
		httpjson.NotFound(w, id)
		return
	}
	a.Threads.Flush()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	for {
		evs, err := a.Threads.Events(id, after, exportBatch)
		if err != nil {
			a.Log.Error("export events", "thread", id, "err", err)
			return
		}
		if len(evs) == 0 {
			return
		}
		for _, e := range evs {
			line, err := wire.Marshal(e)
			if err != nil {
				continue
			}
			if _, err := w.Write(append(line, '\n')); err != nil {
				return
			}
		}
		after = evs[len(evs)-1].Seq
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
}
