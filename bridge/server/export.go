package server

import (
	"net/http"
	"strconv"

	"github.com/boxwire/boxwire/bridge/internal/httpjson"
	"github.com/boxwire/boxwire/bridge/wire"
)

// exportEvents answers GET /v1/threads/{id}/events?after=N: the thread's
// stored events with seq > N (default 0) as JSON lines
// (application/x-ndjson), oldest first, read from the store page by page.
// A thread the store no longer knows is 404.
func (s *Server) exportEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after, err := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	if r.URL.Query().Get("after") == "" {
		after, err = 0, nil
	}
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, wire.CodeBadMessage, "after must be a seq number")
		return
	}
	if _, ok, err := s.cfg.Store.Get(r.Context(), id); err != nil || (!ok && s.lookup(id) == nil) {
		httpjson.NotFound(w, id)
		return
	}
	s.db.Flush()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	for {
		evs, err := s.db.Events(id, after, replayBatch)
		if err != nil {
			s.log.Error("export events", "thread", id, "err", err)
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
