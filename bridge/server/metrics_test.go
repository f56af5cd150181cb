package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/e2e/llmscript"
)

// scrapeMetrics is GET /metrics as the admin, parsed with the Prometheus
// library's text parser.
func (e *env) scrapeMetrics() map[string]*dto.MetricFamily {
	e.t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(e.metricsText()))
	if err != nil {
		e.t.Fatalf("parse GET /metrics: %v", err)
	}
	return fams
}

// metricValue is the value of the one series of name whose labels
// include labels (name=value pairs): a gauge's or counter's value, a
// histogram's count; ok false when there is none.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels ...string) (v float64, ok bool) {
	for _, m := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for _, kv := range labels {
			k, val, _ := strings.Cut(kv, "=")
			match = match && have[k] == val
		}
		if match {
			switch {
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			default:
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// viaLLM posts a chat completion to the LLM proxy in a sandbox's socket
// folder with the sandbox's token, as its agent would, and returns the
// answer's body.
func viaLLM(t *testing.T, dir, token, body string) string {
	t.Helper()
	c := &http.Client{Timeout: waitFor, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(dir, "llm.sock"))
	}}}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, "http://boxwire-llm/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("LLM call through %s: %v", dir, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("LLM call: %d %s", resp.StatusCode, data)
	}
	return string(data)
}

// TestMetrics: GET /metrics, in the Prometheus text format, counts what
// happens on a bridge: a thread's sandbox, its client and agent
// connections, its model calls through the proxy (the scripted model's
// usage as tokens, from a plain answer and from a stream's last chunk)
// and its egress decisions; it stays admins only.
func TestMetrics(t *testing.T) {
	script := llmscript.Script{Turns: []llmscript.Turn{{Steps: []llmscript.Step{{Content: "hello from the model"}}}}}
	model := httptest.NewServer(llmscript.New(script, llmscript.Options{APIKey: testKey}))
	t.Cleanup(model.Close)
	allowed, denied := loopbackServer(t, "A"), loopbackServer(t, "B")
	e := newEnvWith(t, func(c *server.Config) {
		c.LLM.Upstream, c.EgressThreadMax = model.URL+"/v1", []string{allowed}
	})

	fams := e.scrapeMetrics()
	for _, name := range []string{"boxwire_sandboxes", "boxwire_threads_live", "boxwire_client_connections",
		"boxwire_agent_connections", "boxwire_egress_decisions_total", "boxwire_store_up", "boxwire_threads_stored"} {
		if fams[name] == nil {
			t.Errorf("GET /metrics lacks %s before any thread", name)
		}
	}

	_, info, _ := e.createThread(`{"egress":["` + allowed + `"]}`)
	s, _ := e.attach(info.ID, 0)
	if got := s.turn("m1", "hello"); len(got) == 0 {
		t.Fatal("no turn")
	}
	dir := e.socketDir(info.SandboxID)
	a, ok := e.mgr.Agent(info.SandboxID)
	if !ok {
		t.Fatal("no agent")
	}
	if body := viaLLM(t, dir, a.Token(), `{"model":"m-stream","stream":true,"messages":[{"role":"user","content":"hello"}]}`); !strings.Contains(body, "[DONE]") {
		t.Fatalf("streamed answer: %s", body)
	}
	if code, _ := viaEgress(t, dir, allowed); code != http.StatusOK {
		t.Fatalf("allowed egress: %d", code)
	}
	if code, _ := viaEgress(t, dir, denied); code != http.StatusForbidden {
		t.Fatalf("denied egress: %d", code)
	}

	fams = e.scrapeMetrics()
	// The scripted model counts about four characters a token: the
	// prompt "user"+"hello" is 3, the answer "hello from the model" 5.
	for _, w := range []struct {
		v      float64
		name   string
		labels []string
	}{
		{1, "boxwire_llm_call_seconds", []string{"model=m", "outcome=ok"}},
		{3, "boxwire_llm_tokens_total", []string{"model=m", "type=prompt"}},
		{5, "boxwire_llm_tokens_total", []string{"model=m", "type=completion"}},
		{1, "boxwire_llm_call_seconds", []string{"model=m-stream", "outcome=ok"}},
		{3, "boxwire_llm_tokens_total", []string{"model=m-stream", "type=prompt"}},
		{5, "boxwire_llm_tokens_total", []string{"model=m-stream", "type=completion"}},
		{1, "boxwire_egress_decisions_total", []string{"decision=allowed", "reason=rule"}},
		{1, "boxwire_egress_decisions_total", []string{"decision=denied", "reason=no_rule"}},
		{0, "boxwire_egress_decisions_total", []string{"decision=denied", "reason=bad_target"}},
		{1, "boxwire_sandboxes", []string{"engine=docker", "state=running"}},
		{0, "boxwire_sandboxes", []string{"state=starting"}},
		{1, "boxwire_threads_live", nil},
		{1, "boxwire_threads_stored", nil},
		{0, "boxwire_threads_suspended", nil},
		{1, "boxwire_client_connections", nil},
		{1, "boxwire_agent_connections", nil},
		{1, "boxwire_thread_agent", []string{"thread=" + info.ID, "image=boxwire:test"}},
		{1, "boxwire_leases_held", nil},
		{1, "boxwire_store_up", nil},
	} {
		if got, ok := metricValue(fams, w.name, w.labels...); !ok || got != w.v {
			t.Errorf("%s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.v)
		}
	}

	req, _ := http.NewRequest(http.MethodGet, e.hs.URL+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a token: %d, want 401", resp.StatusCode)
	}
}
