package server

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// serveMetrics answers GET /metrics (admins) in the Prometheus text format
// (version 0.0.4): per live thread the image and the agent build its
// sandbox runs (boxwire_thread_agent, 1 per thread), and how many threads
// run each agent version of each image (boxwire_agent_threads). A
// suspended thread has no sandbox and is not listed. It asks no engine.
func (s *Server) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	threads := make([]*thread, 0, len(s.threads))
	for _, t := range s.threads {
		threads = append(threads, t)
	}
	s.mu.Unlock()
	sort.Slice(threads, func(i, j int) bool { return threads[i].id < threads[j].id })
	var b strings.Builder
	b.WriteString("# HELP boxwire_thread_agent A live thread: the image and the agent build its sandbox runs.\n")
	b.WriteString("# TYPE boxwire_thread_agent gauge\n")
	type key struct{ image, version string }
	counts := map[key]int{}
	for _, t := range threads {
		st := s.fleet.Status(t.box)
		image := t.box.Image()
		fmt.Fprintf(&b, "boxwire_thread_agent{thread=%s,image=%s,image_id=%s,agent_version=%s,agent_hash=%s} 1\n",
			label(t.id), label(image), label(st.ImageID), label(st.Agent.Version), label(st.Agent.Hash))
		counts[key{image, st.Agent.Version}]++
	}
	b.WriteString("# HELP boxwire_agent_threads Live threads per image and agent version.\n")
	b.WriteString("# TYPE boxwire_agent_threads gauge\n")
	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].image != keys[j].image {
			return keys[i].image < keys[j].image
		}
		return keys[i].version < keys[j].version
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "boxwire_agent_threads{image=%s,agent_version=%s} %d\n", label(k.image), label(k.version), counts[k])
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// label quotes v as a Prometheus label value: backslash, double quote and
// newline escaped.
func label(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v) + `"`
}
