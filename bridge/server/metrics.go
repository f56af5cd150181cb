package server

import (
	"context"

	"github.com/boxwire/boxwire/bridge/metrics"
	"github.com/boxwire/boxwire/bridge/store"
)

// metricThreads is every live thread as GET /metrics shows it
// (bridge/metrics): its image, and the image id and agent build its
// sandbox runs (the fleet's status; no engine is asked).
func (s *Server) metricThreads() []metrics.Thread {
	var out []metrics.Thread
	for _, t := range s.liveThreads() {
		st := s.fleet.Status(t.box)
		out = append(out, metrics.Thread{ID: t.id, Image: t.box.Image(), ImageID: st.ImageID,
			AgentVersion: st.Agent.Version, AgentHash: st.Agent.Hash})
	}
	return out
}

// metricLeases is the store and leases part of GET /metrics
// (metrics.LeaseText): whether the store answers now, the leases held,
// lost and taken over (leases.go, failover.go), and the store's append
// latency.
func (s *Server) metricLeases() string {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	text := metrics.LeaseText(metrics.Leases{StoreUp: s.db.Ping(ctx) == nil, Held: s.leases.Count(),
		Lost: s.leases.Lost.Load(), TakenOver: s.leases.TakenOver.Load()})
	if timed, ok := s.db.(interface{ AppendLatency() store.Latency }); ok { // both stores (bridge/store)
		l := timed.AppendLatency()
		text += metrics.HistogramText("boxwire_event_append_seconds", "From an event's append to its commit: what a client waits before it sees it.",
			metrics.Histogram{Bounds: l.Bounds, Counts: l.Counts, Sum: l.Sum, Count: l.Count})
	}
	return text
}
