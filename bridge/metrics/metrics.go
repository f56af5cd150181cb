package metrics

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config configures a Metrics.
type Config struct {
	// Source is read once per scrape. Required.
	Source Source
	// Logger receives the errors of a scrape; nil discards them.
	Logger *slog.Logger
}

// llmCallBuckets are the upper bounds, in seconds, of the buckets of
// boxwire_llm_call_seconds: from under 50 ms (a refused call) to a long
// completion's minutes.
var llmCallBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}

// maxModels caps the distinct model label values: the model is whatever
// a sandbox's request names, so the models after the first maxModels are
// counted under "other" rather than growing the series without bound.
const maxModels = 64

// Egress decisions and their reasons (boxwire_egress_decisions_total).
const (
	DecisionAllowed = "allowed"
	DecisionDenied  = "denied"
	// ReasonRule: a rule decided (the allowlist, a thread's rule, a policy
	// host rule or credential, or a person asked by one).
	ReasonRule = "rule"
	// ReasonNoRule: nothing allows the target.
	ReasonNoRule = "no_rule"
	// ReasonBadTarget: the request named no target the proxy serves.
	ReasonBadTarget = "bad_target"
)

// Metrics is one bridge's registry. Its methods are safe for concurrent
// use and never block on a scrape.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	// Clients are the client WebSocket connections being served (in
	// their hello, attached, or forwarded to the bridge that relays the
	// thread): the server adds one when a connection is upgraded and
	// takes it away when its handler returns.
	Clients prometheus.Gauge

	llmSeconds *prometheus.HistogramVec
	llmTokens  *prometheus.CounterVec
	egress     *prometheus.CounterVec

	mu     sync.Mutex
	models map[string]bool // the model label values in use (maxModels)
}

// New returns the metrics of cfg with their registry; it starts nothing.
func New(cfg Config) (*Metrics, error) {
	if cfg.Source == nil {
		return nil, errors.New("metrics: a source is required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(), models: map[string]bool{},
		Clients: prometheus.NewGauge(prometheus.GaugeOpts{Name: "boxwire_client_connections",
			Help: "Client WebSocket connections this bridge serves: in their hello, attached, or forwarded to the bridge that relays the thread."}),
		llmSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "boxwire_llm_call_seconds",
			Help:    "Model calls through the LLM proxies, from the request's arrival to the end of its answer, by model and outcome.",
			Buckets: llmCallBuckets}, []string{"model", "outcome"}),
		llmTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "boxwire_llm_tokens_total",
			Help: "Tokens of model calls as the upstream reported them (prompt or completion), by model."}, []string{"model", "type"}),
		egress: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "boxwire_egress_decisions_total",
			Help: "Requests the egress proxies decided, by decision (allowed, denied) and reason (rule, no_rule, bad_target)."}, []string{"decision", "reason"}),
	}
	for _, dr := range [][2]string{{DecisionAllowed, ReasonRule}, {DecisionDenied, ReasonRule}, {DecisionDenied, ReasonNoRule}, {DecisionDenied, ReasonBadTarget}} {
		m.egress.WithLabelValues(dr[0], dr[1]) // present at 0 from the start
	}
	var errs []error
	for _, c := range []prometheus.Collector{newStateCollector(cfg.Source), m.Clients, m.llmSeconds, m.llmTokens, m.egress,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		errs = append(errs, m.reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{log}, ErrorHandling: promhttp.ContinueOnError})
	return m, nil
}

// Handler answers GET /metrics in the format the scraper asks for (the
// text format by default), gathering every collector once per request.
func (m *Metrics) Handler() http.Handler { return m.handler }

// ModelCall counts one model call through an LLM proxy: its duration by
// model and outcome, and the prompt and completion tokens the upstream
// reported (zero when it reported none).
func (m *Metrics) ModelCall(model, outcome string, d time.Duration, prompt, completion int) {
	model = m.modelLabel(model)
	m.llmSeconds.WithLabelValues(model, outcome).Observe(d.Seconds())
	if prompt > 0 || completion > 0 {
		m.llmTokens.WithLabelValues(model, "prompt").Add(float64(prompt))
		m.llmTokens.WithLabelValues(model, "completion").Add(float64(completion))
	}
}

// modelLabel is model as a label value: "other" once maxModels others are
// in use.
func (m *Metrics) modelLabel(model string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.models[model] {
		if len(m.models) >= maxModels {
			return "other"
		}
		m.models[model] = true
	}
	return model
}

// Egress counts one egress decision: allowed or not, whether the request
// named no target the proxy serves (invalid), and the rule that decided
// ("" none).
func (m *Metrics) Egress(allowed, invalid bool, rule string) {
	decision, reason := DecisionDenied, ReasonRule
	switch {
	case allowed:
		decision = DecisionAllowed
	case invalid:
		reason = ReasonBadTarget
	case rule == "":
		reason = ReasonNoRule
	}
	m.egress.WithLabelValues(decision, reason).Inc()
}

// slogPrinter is the handler's error log.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Error("metrics scrape", "err", fmt.Sprint(v...)) }
