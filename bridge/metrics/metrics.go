// Package metrics writes the bridge's GET /metrics answer in the
// Prometheus text format (version 0.0.4): per live thread the image and
// the agent build its sandbox runs (boxwire_thread_agent, 1 per thread),
// and how many threads run each agent version of each image
// (boxwire_agent_threads); the store and leases of a bridge
// (LeaseText); histograms (HistogramText: the event append latency).
//
// The server hands it the live threads (a Source, called once per
// request) and guards the route (admins only); this package asks no
// engine and imports nothing of the bridge.
package metrics

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Thread is one live thread as the metrics show it.
type Thread struct {
	ID, Image, ImageID, AgentVersion, AgentHash string
}

// Source returns the live threads, in any order. A suspended thread has
// no sandbox and is not among them.
type Source func() []Thread

// Handler answers GET /metrics with src's threads, sorted by id, and
// then the text of each of more (LeaseText, say), called per request.
func Handler(src Source, more ...func() string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		text := Text(src())
		for _, m := range more {
			text += m()
		}
		_, _ = w.Write([]byte(text))
	})
}

// Leases are a bridge's store and leases as the metrics show them
// (docs/store.md).
type Leases struct {
	// StoreUp is whether the store answered just now (its Ping).
	StoreUp bool
	// Held is how many threads' leases the bridge holds: the threads it
	// relays.
	Held int
	// Lost counts the leases another bridge took from this one since it
	// started; TakenOver the threads it took over from a bridge that was
	// gone.
	Lost, TakenOver uint64
}

// LeaseText is l in the text format: boxwire_store_up,
// boxwire_leases_held, boxwire_leases_lost_total and
// boxwire_threads_taken_over_total.
func LeaseText(l Leases) string {
	up := 0
	if l.StoreUp {
		up = 1
	}
	var b strings.Builder
	for _, m := range []struct {
		name, kind, help string
		v                uint64
	}{
		{"boxwire_store_up", "gauge", "Whether the store answered (1) or not (0).", uint64(up)},
		{"boxwire_leases_held", "gauge", "Thread leases this bridge holds: the threads it relays.", uint64(l.Held)},
		{"boxwire_leases_lost_total", "counter", "Thread leases another bridge took from this one.", l.Lost},
		{"boxwire_threads_taken_over_total", "counter", "Threads this bridge took over from a bridge that was gone.", l.TakenOver},
	} {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", m.name, m.help, m.name, m.kind, m.name, m.v)
	}
	return b.String()
}

// Text is the metrics of threads in the text format.
func Text(threads []Thread) string {
	sort.Slice(threads, func(i, j int) bool { return threads[i].ID < threads[j].ID })
	var b strings.Builder
	b.WriteString("# HELP boxwire_thread_agent A live thread: the image and the agent build its sandbox runs.\n")
	b.WriteString("# TYPE boxwire_thread_agent gauge\n")
	type key struct{ image, version string }
	counts := map[key]int{}
	for _, t := range threads {
		fmt.Fprintf(&b, "boxwire_thread_agent{thread=%s,image=%s,image_id=%s,agent_version=%s,agent_hash=%s} 1\n",
			label(t.ID), label(t.Image), label(t.ImageID), label(t.AgentVersion), label(t.AgentHash))
		counts[key{t.Image, t.AgentVersion}]++
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
	return b.String()
}

// label quotes v as a Prometheus label value: backslash, double quote and
// newline escaped.
func label(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v) + `"`
}

// Histogram is a Prometheus histogram: Counts per bucket (not
// cumulative), one more than Bounds (the last above every bound).
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Sum    float64
	Count  uint64
}

// HistogramText is h in the text format as name (its _bucket series
// cumulative, le="+Inf" last, then _sum and _count).
func HistogramText(name, help string, h Histogram) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum uint64
	for i, c := range h.Counts {
		cum += c
		le := "+Inf"
		if i < len(h.Bounds) {
			le = strconv.FormatFloat(h.Bounds[i], 'g', -1, 64)
		}
		fmt.Fprintf(&b, "%s_bucket{le=%q} %d\n", name, le, cum)
	}
	fmt.Fprintf(&b, "%s_sum %s\n%s_count %d\n", name, strconv.FormatFloat(h.Sum, 'g', -1, 64), name, h.Count)
	return b.String()
}
