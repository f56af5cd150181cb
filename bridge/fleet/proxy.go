package fleet

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/wire"
)

// serveProxy serves a new LLM proxy on llm.sock in the bridge folder.
func (f *Fleet) serveProxy(dirs boxdir.Dirs, log *slog.Logger) (*llmproxy.Listener, error) {
	llmCfg := f.cfg.LLM
	llmCfg.Logger = log.With("component", "llmproxy")
	llmCfg = f.securedLLM(llmCfg, dirs.ID())
	proxy, err := llmproxy.New(llmCfg)
	if err != nil {
		return nil, err
	}
	ln, err := dirs.Listen(llmSocket)
	if err != nil {
		return nil, err
	}
	return proxy.Serve(ln), nil
}

// sandboxToken is the LLM proxy token of the sandbox with folder name id:
// an HMAC of id under the bridge's client token, so it is stable across
// bridge restarts (adopted sandboxes keep theirs), unguessable, and says
// nothing about the client token. Each proxy accepts only its own.
func (f *Fleet) sandboxToken(id string) string {
	m := hmac.New(sha256.New, []byte(f.cfg.Token))
	m.Write([]byte("boxwire llm proxy token\x00" + id))
	return hex.EncodeToString(m.Sum(nil))
}

// securedLLM is the LLM proxy config of the sandbox id: its token, and
// its usage and refusals published to its members.
func (f *Fleet) securedLLM(cfg llmproxy.Config, id string) llmproxy.Config {
	cfg.Token = f.sandboxToken(id)
	cfg.OnUsage = func(r llmproxy.UsageReport) {
		if !f.cfg.UsageEvents {
			return // the proxy logs every call
		}
		f.publish(id, wire.MustNew(wire.TypeUsage, "", "", wire.UsageReport{
			Model: r.Model, Call: wire.Usage(r.Call), Total: wire.Usage(r.Total),
			Requests: r.Requests, TokenBudget: r.TokenBudget,
		}))
	}
	cfg.OnRefused = func(r llmproxy.Refusal) {
		code := wire.CodeLLM
		if r.Budget {
			code = wire.CodeBudgetExceeded
		}
		f.publish(id, wire.ErrorEnvelope("", "", code, "%s", r.Reason))
	}
	return cfg
}
