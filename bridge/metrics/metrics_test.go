package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/boxwire/boxwire/bridge/metrics"
)

func TestText(t *testing.T) {
	t.Parallel()
	got := metrics.Text([]metrics.Thread{
		{ID: "t_b", Image: "img:1", ImageID: "sha256:a", AgentVersion: "v2", AgentHash: "h2"},
		{ID: "t_a", Image: "img:1", ImageID: "sha256:a", AgentVersion: "v1", AgentHash: "h1"},
		{ID: "t_c", Image: `we"ird\` + "\n", AgentVersion: "v1"},
		{ID: "t_d", Image: "img:1", ImageID: "sha256:a", AgentVersion: "v2", AgentHash: "h2"},
	})
	want := `# HELP boxwire_thread_agent A live thread: the image and the agent build its sandbox runs.
# TYPE boxwire_thread_agent gauge
boxwire_thread_agent{thread="t_a",image="img:1",image_id="sha256:a",agent_version="v1",agent_hash="h1"} 1
boxwire_thread_agent{thread="t_b",image="img:1",image_id="sha256:a",agent_version="v2",agent_hash="h2"} 1
boxwire_thread_agent{thread="t_c",image="we\"ird\\\n",image_id="",agent_version="v1",agent_hash=""} 1
boxwire_thread_agent{thread="t_d",image="img:1",image_id="sha256:a",agent_version="v2",agent_hash="h2"} 1
# HELP boxwire_agent_threads Live threads per image and agent version.
# TYPE boxwire_agent_threads gauge
boxwire_agent_threads{image="img:1",agent_version="v1"} 1
boxwire_agent_threads{image="img:1",agent_version="v2"} 2
boxwire_agent_threads{image="we\"ird\\\n",agent_version="v1"} 1
`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	metrics.Handler(func() []metrics.Thread { return nil }).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" || rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, ct)
	}
	if want := metrics.Text(nil); rec.Body.String() != want {
		t.Fatalf("body %q, want %q", rec.Body.String(), want)
	}
}

func TestLeaseText(t *testing.T) {
	t.Parallel()
	got := metrics.LeaseText(metrics.Leases{StoreUp: true, Held: 3, Lost: 1, TakenOver: 2})
	want := `# HELP boxwire_store_up Whether the store answered (1) or not (0).
# TYPE boxwire_store_up gauge
boxwire_store_up 1
# HELP boxwire_leases_held Thread leases this bridge holds: the threads it relays.
# TYPE boxwire_leases_held gauge
boxwire_leases_held 3
# HELP boxwire_leases_lost_total Thread leases another bridge took from this one.
# TYPE boxwire_leases_lost_total counter
boxwire_leases_lost_total 1
# HELP boxwire_threads_taken_over_total Threads this bridge took over from a bridge that was gone.
# TYPE boxwire_threads_taken_over_total counter
boxwire_threads_taken_over_total 2
`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	rec := httptest.NewRecorder()
	metrics.Handler(func() []metrics.Thread { return nil }, func() string { return got }).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Body.String() != metrics.Text(nil)+want {
		t.Fatalf("Handler with LeaseText: %q", rec.Body.String())
	}
}

func TestHistogramText(t *testing.T) {
	t.Parallel()
	got := metrics.HistogramText("x_seconds", "X.", metrics.Histogram{Bounds: []float64{0.001, 0.5}, Counts: []uint64{2, 0, 1}, Sum: 1.25, Count: 3})
	want := `# HELP x_seconds X.
# TYPE x_seconds histogram
x_seconds_bucket{le="0.001"} 2
x_seconds_bucket{le="0.5"} 2
x_seconds_bucket{le="+Inf"} 3
x_seconds_sum 1.25
x_seconds_count 3
`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
