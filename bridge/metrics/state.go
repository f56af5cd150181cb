package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Source returns the bridge's state now. It is called once per scrape,
// on the scrape's goroutine, and should return within a few seconds
// (bound what it asks the store).
type Source func() State

// State is what a bridge knows of itself at one moment.
type State struct {
	// Threads are the live threads, in any order. A suspended thread has
	// no sandbox and is not among them.
	Threads []Thread
	// AgentConnections counts the live threads whose agent connection is
	// up now.
	AgentConnections int
	// Engine names what runs the sandboxes ("docker", "kubernetes");
	// Sandboxes are this bridge's by state.
	Engine    string
	Sandboxes Sandboxes
	// Store is what the store holds of every bridge's threads; nil when
	// it could not be read just now.
	Store *Stored
	// Leases are this bridge's store and leases.
	Leases Leases
	// AppendLatency is the store's event append latency; nil when the
	// store keeps none.
	AppendLatency *Histogram
}

// Thread is one live thread as the metrics show it.
type Thread struct {
	ID, Image, ImageID, AgentVersion, AgentHash string
}

// Sandboxes counts a bridge's sandboxes by state.
type Sandboxes struct {
	// Starting are being made (for a thread or the warm pool), Running
	// made and serving threads, Pool ready in the warm pool.
	Starting, Running, Pool int
}

// Stored is what the store holds of the threads of every bridge on it.
type Stored struct {
	// Threads are the stored threads, Suspended those with no sandbox,
	// SuspendedSandboxes the sandboxes they were in (one per thread, or
	// one per assistant shared by several): a workspace volume kept, no
	// container.
	Threads, Suspended, SuspendedSandboxes int
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

// Histogram is a histogram kept outside the registry: Counts per bucket
// (not cumulative), one more than Bounds (the last above every bound).
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Sum    float64
	Count  uint64
}

// stateCollector is the Collector of what a Source returns.
type stateCollector struct {
	src Source

	threadAgent, agentThreads, sandboxes, suspendedBoxes      *prometheus.Desc
	threadsLive, threadsSuspended, threadsStored, agentConns  *prometheus.Desc
	storeUp, leasesHeld, leasesLost, takenOver, appendSeconds *prometheus.Desc
}

func newStateCollector(src Source) *stateCollector {
	d := prometheus.NewDesc
	return &stateCollector{src: src,
		threadAgent:      d("boxwire_thread_agent", "A live thread: the image and the agent build its sandbox runs.", []string{"thread", "image", "image_id", "agent_version", "agent_hash"}, nil),
		agentThreads:     d("boxwire_agent_threads", "Live threads per image and agent version.", []string{"image", "agent_version"}, nil),
		sandboxes:        d("boxwire_sandboxes", "This bridge's sandboxes by state: starting, running, pool (ready in the warm pool).", []string{"engine", "state"}, nil),
		suspendedBoxes:   d("boxwire_sandboxes_suspended", "Suspended sandboxes in the store, of every bridge: a workspace kept, no container.", []string{"engine"}, nil),
		threadsLive:      d("boxwire_threads_live", "Live threads this bridge relays.", nil, nil),
		threadsSuspended: d("boxwire_threads_suspended", "Suspended threads in the store, of every bridge.", nil, nil),
		threadsStored:    d("boxwire_threads_stored", "Threads in the store, live or suspended, of every bridge.", nil, nil),
		agentConns:       d("boxwire_agent_connections", "Live threads whose agent connection is up.", nil, nil),
		storeUp:          d("boxwire_store_up", "Whether the store answered (1) or not (0).", nil, nil),
		leasesHeld:       d("boxwire_leases_held", "Thread leases this bridge holds: the threads it relays.", nil, nil),
		leasesLost:       d("boxwire_leases_lost_total", "Thread leases another bridge took from this one.", nil, nil),
		takenOver:        d("boxwire_threads_taken_over_total", "Threads this bridge took over from a bridge that was gone.", nil, nil),
		appendSeconds:    d("boxwire_event_append_seconds", "From an event's append to its commit: what a client waits before it sees it.", nil, nil),
	}
}

// Describe sends every descriptor of the collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.threadAgent, c.agentThreads, c.sandboxes, c.suspendedBoxes,
		c.threadsLive, c.threadsSuspended, c.threadsStored, c.agentConns,
		c.storeUp, c.leasesHeld, c.leasesLost, c.takenOver, c.appendSeconds} {
		ch <- d
	}
}

// Collect reads the source once and sends its metrics.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		send(ch, d, prometheus.GaugeValue, v, labels...)
	}
	type key struct{ image, version string }
	counts := map[key]int{}
	for _, t := range st.Threads {
		gauge(c.threadAgent, 1, t.ID, t.Image, t.ImageID, t.AgentVersion, t.AgentHash)
		counts[key{t.Image, t.AgentVersion}]++
	}
	for k, n := range counts {
		gauge(c.agentThreads, float64(n), k.image, k.version)
	}
	for state, n := range map[string]int{"starting": st.Sandboxes.Starting, "running": st.Sandboxes.Running, "pool": st.Sandboxes.Pool} {
		gauge(c.sandboxes, float64(n), st.Engine, state)
	}
	gauge(c.threadsLive, float64(len(st.Threads)))
	gauge(c.agentConns, float64(st.AgentConnections))
	if s := st.Store; s != nil {
		gauge(c.suspendedBoxes, float64(s.SuspendedSandboxes), st.Engine)
		gauge(c.threadsSuspended, float64(s.Suspended))
		gauge(c.threadsStored, float64(s.Threads))
	}
	up := 0.0
	if st.Leases.StoreUp {
		up = 1
	}
	gauge(c.storeUp, up)
	gauge(c.leasesHeld, float64(st.Leases.Held))
	send(ch, c.leasesLost, prometheus.CounterValue, float64(st.Leases.Lost))
	send(ch, c.takenOver, prometheus.CounterValue, float64(st.Leases.TakenOver))
	if h := st.AppendLatency; h != nil {
		ch <- histogram(c.appendSeconds, *h)
	}
}

// send sends one constant metric, or the error that made it invalid.
func send(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}

// histogram is h as a constant histogram of d: its buckets cumulative,
// the last (above every bound) the implicit +Inf.
func histogram(d *prometheus.Desc, h Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		if i < len(h.Counts) {
			cum += h.Counts[i]
		}
		buckets[b] = cum
	}
	m, err := prometheus.NewConstHistogram(d, h.Count, h.Sum, buckets)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}
