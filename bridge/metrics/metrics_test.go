package metrics_test

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/boxwire/boxwire/bridge/metrics"
)

// state is a bridge with two images, three threads, sandboxes in each
// state, a store and an append latency.
var state = metrics.State{
	Threads: []metrics.Thread{
		{ID: "t_b", Image: "img:1", ImageID: "sha256:a", AgentVersion: "v2", AgentHash: "h2"},
		{ID: "t_a", Image: "img:1", ImageID: "sha256:a", AgentVersion: "v1", AgentHash: "h1"},
		{ID: "t_c", Image: `we"ird\` + "\n", AgentVersion: "v2"},
	},
	AgentConnections: 2,
	Engine:           "docker",
	Sandboxes:        metrics.Sandboxes{Starting: 1, Running: 3, Pool: 2},
	Store:            &metrics.Stored{Threads: 7, Suspended: 4, SuspendedSandboxes: 3},
	Leases:           metrics.Leases{StoreUp: true, Held: 3, Lost: 1, TakenOver: 2},
	AppendLatency:    &metrics.Histogram{Bounds: []float64{0.001, 0.5}, Counts: []uint64{2, 0, 1}, Sum: 1.25, Count: 3},
}

// newMetrics is a Metrics over st (read at each scrape).
func newMetrics(t *testing.T, st func() metrics.State) *metrics.Metrics {
	t.Helper()
	m, err := metrics.New(metrics.Config{Source: st})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// scrape is GET /metrics of m, parsed with the library's text parser.
func scrape(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse GET /metrics: %v", err)
	}
	return fams
}

// value is the value of the series of name whose labels include labels
// ("k=v" each); ok false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		if !slices.ContainsFunc(labels, func(kv string) bool { k, v, _ := strings.Cut(kv, "="); return have[k] != v }) {
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// want fails the test unless the series of name with labels has v.
func want(t *testing.T, fams map[string]*dto.MetricFamily, v float64, name string, labels ...string) {
	t.Helper()
	if got, ok := value(fams, name, labels...); !ok || got != v {
		t.Errorf("%s%v = %v (present %v), want %v", name, labels, got, ok, v)
	}
}

// TestEveryMetric: a scrape has every metric docs/lifecycle.md names,
// of its type — a metric that goes missing or changes type fails here.
func TestEveryMetric(t *testing.T) {
	t.Parallel()
	m := newMetrics(t, func() metrics.State { return state })
	m.ModelCall("m1", "ok", time.Second, 7, 3)
	fams := scrape(t, m)
	for name, typ := range map[string]dto.MetricType{
		"boxwire_thread_agent":             dto.MetricType_GAUGE,
		"boxwire_agent_threads":            dto.MetricType_GAUGE,
		"boxwire_sandboxes":                dto.MetricType_GAUGE,
		"boxwire_sandboxes_suspended":      dto.MetricType_GAUGE,
		"boxwire_threads_live":             dto.MetricType_GAUGE,
		"boxwire_threads_suspended":        dto.MetricType_GAUGE,
		"boxwire_threads_stored":           dto.MetricType_GAUGE,
		"boxwire_client_connections":       dto.MetricType_GAUGE,
		"boxwire_agent_connections":        dto.MetricType_GAUGE,
		"boxwire_store_up":                 dto.MetricType_GAUGE,
		"boxwire_leases_held":              dto.MetricType_GAUGE,
		"boxwire_leases_lost_total":        dto.MetricType_COUNTER,
		"boxwire_threads_taken_over_total": dto.MetricType_COUNTER,
		"boxwire_event_append_seconds":     dto.MetricType_HISTOGRAM,
		"boxwire_llm_call_seconds":         dto.MetricType_HISTOGRAM,
		"boxwire_llm_tokens_total":         dto.MetricType_COUNTER,
		"boxwire_egress_decisions_total":   dto.MetricType_COUNTER,
		"go_goroutines":                    dto.MetricType_GAUGE,
		"process_cpu_seconds_total":        dto.MetricType_COUNTER,
	} {
		if f := fams[name]; f == nil || f.GetType() != typ {
			t.Errorf("%s: %v, want a %v", name, f, typ)
		}
	}
}

// TestState: the metrics read from the source at each scrape.
func TestState(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	st := state
	m := newMetrics(t, func() metrics.State { mu.Lock(); defer mu.Unlock(); return st })
	fams := scrape(t, m)
	want(t, fams, 1, "boxwire_thread_agent", "thread=t_a", "image=img:1", "image_id=sha256:a", "agent_version=v1", "agent_hash=h1")
	want(t, fams, 1, "boxwire_thread_agent", "thread=t_c", `image=we"ird\`+"\n", "image_id=", "agent_version=v2")
	want(t, fams, 1, "boxwire_agent_threads", "image=img:1", "agent_version=v1")
	want(t, fams, 1, "boxwire_agent_threads", "image=img:1", "agent_version=v2")
	want(t, fams, 1, "boxwire_agent_threads", `image=we"ird\`+"\n", "agent_version=v2")
	want(t, fams, 1, "boxwire_sandboxes", "engine=docker", "state=starting")
	want(t, fams, 3, "boxwire_sandboxes", "engine=docker", "state=running")
	want(t, fams, 2, "boxwire_sandboxes", "engine=docker", "state=pool")
	want(t, fams, 3, "boxwire_sandboxes_suspended", "engine=docker")
	want(t, fams, 3, "boxwire_threads_live")
	want(t, fams, 4, "boxwire_threads_suspended")
	want(t, fams, 7, "boxwire_threads_stored")
	want(t, fams, 2, "boxwire_agent_connections")
	want(t, fams, 1, "boxwire_store_up")
	want(t, fams, 3, "boxwire_leases_held")
	want(t, fams, 1, "boxwire_leases_lost_total")
	want(t, fams, 2, "boxwire_threads_taken_over_total")
	h := fams["boxwire_event_append_seconds"].GetMetric()[0].GetHistogram()
	var cum []string
	for _, b := range h.GetBucket() {
		cum = append(cum, fmt.Sprintf("%g:%d", b.GetUpperBound(), b.GetCumulativeCount()))
	}
	if got := strings.Join(cum, " "); got != "0.001:2 0.5:2 +Inf:3" || h.GetSampleSum() != 1.25 || h.GetSampleCount() != 3 {
		t.Errorf("append latency buckets %s, sum %v, count %d", got, h.GetSampleSum(), h.GetSampleCount())
	}

	mu.Lock()
	st.Threads, st.Store, st.Leases.StoreUp, st.AppendLatency = st.Threads[:1], nil, false, nil
	st.Sandboxes.Running = 0
	mu.Unlock()
	fams = scrape(t, m)
	want(t, fams, 1, "boxwire_threads_live")
	want(t, fams, 0, "boxwire_store_up")
	want(t, fams, 0, "boxwire_sandboxes", "state=running")
	if _, ok := value(fams, "boxwire_thread_agent", "thread=t_a"); ok {
		t.Error("t_a is still shown after it left")
	}
	for _, name := range []string{"boxwire_threads_stored", "boxwire_threads_suspended", "boxwire_sandboxes_suspended", "boxwire_event_append_seconds"} {
		if fams[name] != nil {
			t.Errorf("%s shown though the store was not read", name)
		}
	}
}

// TestEvents: model calls, egress decisions and client connections are
// counted as they happen, each Metrics apart from another's (tests run
// several bridges in one process).
func TestEvents(t *testing.T) {
	t.Parallel()
	src := func() metrics.State { return metrics.State{Engine: "kubernetes"} }
	m, other := newMetrics(t, src), newMetrics(t, src)
	fams := scrape(t, m)
	want(t, fams, 0, "boxwire_egress_decisions_total", "decision=denied", "reason=no_rule")
	want(t, fams, 0, "boxwire_sandboxes", "engine=kubernetes", "state=running")

	m.ModelCall("m1", "ok", 1500*time.Millisecond, 7, 3)
	m.ModelCall("m1", "ok", 200*time.Millisecond, 5, 1)
	m.ModelCall("m1", "refused", 0, 0, 0)
	m.Egress(true, false, "api.example.com")
	m.Egress(false, false, "")
	m.Egress(false, false, "")
	m.Egress(false, false, "host github.com deny")
	m.Egress(false, true, "")
	m.Clients.Inc()
	m.Clients.Inc()
	m.Clients.Dec()
	fams = scrape(t, m)
	want(t, fams, 2, "boxwire_llm_call_seconds", "model=m1", "outcome=ok")
	want(t, fams, 1, "boxwire_llm_call_seconds", "model=m1", "outcome=refused")
	for _, s := range fams["boxwire_llm_call_seconds"].GetMetric() {
		if h := s.GetHistogram(); h.GetSampleCount() == 2 && math.Abs(h.GetSampleSum()-1.7) > 1e-9 {
			t.Errorf("the ok calls took %v s, want 1.7", h.GetSampleSum())
		}
	}
	want(t, fams, 12, "boxwire_llm_tokens_total", "model=m1", "type=prompt")
	want(t, fams, 4, "boxwire_llm_tokens_total", "model=m1", "type=completion")
	want(t, fams, 1, "boxwire_egress_decisions_total", "decision=allowed", "reason=rule")
	want(t, fams, 2, "boxwire_egress_decisions_total", "decision=denied", "reason=no_rule")
	want(t, fams, 1, "boxwire_egress_decisions_total", "decision=denied", "reason=rule")
	want(t, fams, 1, "boxwire_egress_decisions_total", "decision=denied", "reason=bad_target")
	want(t, fams, 1, "boxwire_client_connections")

	fams = scrape(t, other)
	want(t, fams, 0, "boxwire_egress_decisions_total", "decision=allowed", "reason=rule")
	want(t, fams, 0, "boxwire_client_connections")
	if fams["boxwire_llm_call_seconds"] != nil {
		t.Error("another bridge's registry has this one's model calls")
	}
}

// TestModelLabelsBounded: the model is what a sandbox names; past 64
// models the rest count as "other".
func TestModelLabelsBounded(t *testing.T) {
	t.Parallel()
	m := newMetrics(t, func() metrics.State { return metrics.State{} })
	for i := range 70 {
		m.ModelCall(fmt.Sprintf("m%d", i), "ok", time.Millisecond, 1, 1)
	}
	fams := scrape(t, m)
	if n := len(fams["boxwire_llm_call_seconds"].GetMetric()); n != 65 {
		t.Errorf("%d series, want 64 models and other", n)
	}
	want(t, fams, 6, "boxwire_llm_call_seconds", "model=other")
	want(t, fams, 1, "boxwire_llm_call_seconds", "model=m63")
}
