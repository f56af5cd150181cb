package server

import "github.com/boxwire/boxwire/bridge/metrics"

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
