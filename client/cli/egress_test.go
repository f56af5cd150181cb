package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/chat/chattest"
	"github.com/boxwire/boxwire/client/cli"
)

// TestInteractiveEgress: /egress shows the thread's rules, /egress RULE...
// replaces them through PATCH, --clear removes them, and a refusal is
// printed with the bridge's code and reason.
func TestInteractiveEgress(t *testing.T) {
	srv := chattest.New(t, chattest.Options{Handler: chattest.Scripted("t_eg", okTurn)})
	var mu sync.Mutex
	var rules, sent []string
	answer := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(wire.ThreadInfo{ID: "t_eg", Egress: rules})
	}
	srv.Handle("GET /v1/threads/{id}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		answer(w)
	})
	srv.Handle("PATCH /v1/threads/{id}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		var req wire.UpdateThread
		raw, _ := io.ReadAll(r.Body)
		sent = append(sent, r.PathValue("id")+" "+string(raw))
		_ = json.Unmarshal(raw, &req)
		for _, rule := range req.Egress {
			if rule == "evil.test" {
				chattest.WriteError(w, http.StatusBadRequest, wire.CodeNotAllowed, `egress: rule "evil.test" is outside what this bridge lets a thread ask for (.example.com)`)
				return
			}
		}
		rules = req.Egress
		if len(rules) == 0 {
			rules = nil
		}
		answer(w)
	})
	in, typed := io.Pipe()
	t.Cleanup(func() { typed.Close() })
	c := start(t, cli.Options{Chat: chat.Config{URL: srv.URL}, In: in})
	c.out.waitFor(t, "› ")

	steps := []struct{ typed, out, errs string }{
		{"/egress", "egress rules of t_eg: none (the bridge's allowlist only)\n", ""},
		{"/egress pypi.example.com .hosted.example.com", "egress rules of t_eg: pypi.example.com .hosted.example.com\n", ""},
		{"/egress", "egress rules of t_eg: pypi.example.com .hosted.example.com\n", ""},
		{"/egress evil.test", "", `boxwire: egress: the bridge refused (not_allowed): egress: rule "evil.test" is outside what this bridge lets a thread ask for (.example.com)` + "\n"},
		{"/egress -x", "usage: /egress [RULE...] or /egress --clear\n", ""},
		{"/egress --clear", "egress rules of t_eg: none (the bridge's allowlist only)\n", ""},
	}
	for i, st := range steps {
		io.WriteString(typed, st.typed+"\n")
		if st.out != "" {
			c.out.waitForCount(t, st.out, strings.Count(stepsOut(steps[:i+1]), st.out))
		}
		if st.errs != "" {
			c.errs.waitFor(t, st.errs)
		}
		c.out.waitForCount(t, "› ", i+2)
	}
	typed.Close()
	if code := c.wait(t); code != cli.ExitOK {
		t.Errorf("exit code %d; stderr: %s", code, c.errs.String())
	}
	want := []string{
		`t_eg {"egress":["pypi.example.com",".hosted.example.com"]}`,
		`t_eg {"egress":["evil.test"]}`,
		`t_eg {"egress":[]}`,
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(sent, "\n") != strings.Join(want, "\n") {
		t.Errorf("sent:\n%s\nwant:\n%s", strings.Join(sent, "\n"), strings.Join(want, "\n"))
	}
}

// stepsOut is every expected stdout line of steps, joined.
func stepsOut(steps []struct{ typed, out, errs string }) string {
	var b strings.Builder
	for _, st := range steps {
		b.WriteString(st.out)
	}
	return b.String()
}
