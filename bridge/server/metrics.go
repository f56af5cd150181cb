package server

import (
	"context"

	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/metrics"
	"github.com/boxwire/boxwire/bridge/store"
)

// newMetrics makes the server's GET /metrics registry (bridge/metrics),
// its own: several servers run in one process in tests.
func (s *Server) newMetrics() (err error) {
	s.metrics, err = metrics.New(metrics.Config{Source: s.metricState, Logger: s.log})
	return err
}

// metricState is what GET /metrics shows of the server at one scrape
// (metrics.State): the live threads with the image and agent build their
// sandboxes run, the agent connections up, the fleet's sandboxes by
// state, what the store holds, the leases and the store's append
// latency. It asks no engine; the store's answers are bounded by
// readyTimeout.
func (s *Server) metricState() metrics.State {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	st := metrics.State{Engine: s.cfg.Engine, Sandboxes: metrics.Sandboxes(s.fleet.Counts()), Store: s.metricStore(ctx),
		Leases: metrics.Leases{StoreUp: s.db.Ping(ctx) == nil, Held: s.leases.Count(),
			Lost: s.leases.Lost.Load(), TakenOver: s.leases.TakenOver.Load()}}
	for _, t := range s.liveThreads() {
		fs := s.fleet.Status(t.box)
		st.Threads = append(st.Threads, metrics.Thread{ID: t.id, Image: t.box.Image(), ImageID: fs.ImageID,
			AgentVersion: fs.Agent.Version, AgentHash: fs.Agent.Hash})
		select {
		case <-t.deadCh():
		default:
			st.AgentConnections++
		}
	}
	if timed, ok := s.db.(interface{ AppendLatency() store.Latency }); ok { // both stores (bridge/store)
		l := timed.AppendLatency()
		st.AppendLatency = &metrics.Histogram{Bounds: l.Bounds, Counts: l.Counts, Sum: l.Sum, Count: l.Count}
	}
	return st
}

// metricStore counts the stored threads of every bridge, the suspended
// ones and the sandboxes they were in; nil when the store does not answer.
func (s *Server) metricStore(ctx context.Context) *metrics.Stored {
	recs, err := s.cfg.Store.List(ctx)
	if err != nil {
		return nil
	}
	out := &metrics.Stored{Threads: len(recs)}
	boxes := map[string]bool{}
	for _, r := range recs {
		if r.Suspended != nil {
			out.Suspended++
			boxes[r.Box] = true
		}
	}
	out.SuspendedSandboxes = len(boxes)
	return out
}

// modelCalled counts a model call of any sandbox's LLM proxy
// (llmproxy.Config.OnCall).
func (s *Server) modelCalled(c llmproxy.Call) {
	s.metrics.ModelCall(c.Model, c.Outcome, c.Duration, c.Usage.PromptTokens, c.Usage.CompletionTokens)
}

// egressDecided counts a decision of any sandbox's egress proxy
// (fleet.Config.EgressDecided).
func (s *Server) egressDecided(d egress.Decision) { s.metrics.Egress(d.Allowed, d.Invalid, d.Rule) }
