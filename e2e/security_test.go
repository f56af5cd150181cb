package e2e_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// TestSecurity runs the security cases against one bridge whose
// environment, key and key file hold canary secrets.
func TestSecurity(t *testing.T) {
	e := newEnv(t, helloScript)
	canary := "CANARY-" + randHex(16)
	keyFile := filepath.Join(e.dataDir, "key.txt")
	if err := os.WriteFile(keyFile, []byte(canary+"-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.startBridge("BOXWIRE_CANARY_ENV="+canary+"-env", "BOXWIRE_KEY_FILE="+keyFile, "BOXWIRE_USAGE_EVENTS=1")
	s := e.dial("")
	events, _ := s.turn("hello")
	boxes := e.containers(nil)
	if len(boxes) != 1 {
		t.Fatalf("%d sandboxes", len(boxes))
	}
	cid := boxes[0].ID
	secrets := []string{canary, e.apiKey, e.token}

	cases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"posture accepted by strict check", func(t *testing.T) {
			if !strings.Contains(e.bridge.logText(), `"posture"`) && !strings.Contains(e.bridge.logText(), "sandbox created") {
				t.Fatalf("no sandbox created under the strict posture check")
			}
			status := dockerExec(t, cid, "sh", "-c", "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/1/status /proc/self/status")
			for _, want := range []string{"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
				if strings.Count(status, want) != 2 {
					t.Errorf("%q not in both init and a child:\n%s", want, status)
				}
			}
		}},
		{"read-only root", func(t *testing.T) {
			out := dockerExec(t, cid, "sh", "-c", "for d in / /etc /usr; do touch $d/x 2>/dev/null && echo WROTE $d; done; touch /tmp/x /workspace/x && echo ok")
			if strings.Contains(out, "WROTE") || !strings.Contains(out, "ok") {
				t.Fatalf("writes: %s", out)
			}
		}},
		{"only loopback, no route", func(t *testing.T) {
			out := dockerExec(t, cid, "sh", "-c", "ls /sys/class/net; echo ---; tail -n +2 /proc/net/route")
			ifaces, routes, _ := strings.Cut(out, "---")
			if strings.TrimSpace(ifaces) != "lo" || strings.TrimSpace(routes) != "" {
				t.Fatalf("network: %s", out)
			}
		}},
		{"no engine socket, no proxy env without egress", func(t *testing.T) {
			out := dockerExec(t, cid, "sh", "-c", "ls /var/run/docker.sock /run/docker.sock 2>&1; ls /run/boxwire")
			if !strings.Contains(out, "No such file") || strings.Contains(out, "egress.sock") {
				t.Fatalf("mounts: %s", out)
			}
		}},
		{"mounts: only the workspace, the two sandbox folders and /tmp", func(t *testing.T) {
			info := dockerInspect(t, cid)
			mounts, _ := info["Mounts"].([]any)
			// destination → whether it may be written
			allowed := map[string]bool{"/workspace": true, "/run/boxwire": false, "/run/boxwire-agent": true}
			for _, m := range mounts {
				mm, _ := m.(map[string]any)
				dst, _ := mm["Destination"].(string)
				src, _ := mm["Source"].(string)
				rw, _ := mm["RW"].(bool)
				want, ok := allowed[dst]
				if !ok || rw != want || strings.Contains(src, "docker.sock") || strings.HasPrefix(src, "/root") || strings.HasPrefix(src, "/home") {
					t.Errorf("mount %s -> %s (rw %v)", src, dst, rw)
				}
				delete(allowed, dst)
			}
			if len(allowed) != 0 {
				t.Errorf("mounts %v: missing %v", mounts, allowed)
			}
			host, _ := info["HostConfig"].(map[string]any)
			tmpfs, _ := host["Tmpfs"].(map[string]any)
			if len(tmpfs) != 1 || tmpfs["/tmp"] == nil {
				t.Errorf("tmpfs %v, want /tmp only", tmpfs)
			}
		}},
		{"no canary in the sandbox", func(t *testing.T) {
			out := dockerExec(t, cid, "sh", "-c",
				"cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; grep -rIl -e "+canary+" -e "+e.apiKey+" / --exclude-dir=proc --exclude-dir=sys 2>/dev/null; true")
			for _, sec := range secrets {
				if strings.Contains(out, sec) {
					t.Fatalf("secret %q found in the sandbox", sec)
				}
			}
			if !strings.Contains(out, "BOXWIRE_LISTEN=") {
				t.Fatalf("environ not read: %s", out)
			}
			if strings.Contains(out, "BOXWIRE_LLM_TOKEN=") { // it comes in the claim
				t.Fatalf("the LLM token is in an environment in the sandbox: %s", out)
			}
		}},
		{"no canary in frames", func(t *testing.T) {
			for _, ev := range events {
				raw, _ := wire.Marshal(ev)
				for _, sec := range secrets {
					if strings.Contains(string(raw), sec) {
						t.Fatalf("secret in frame %s", raw)
					}
				}
			}
		}},
		{"websocket auth", func(t *testing.T) {
			for _, tok := range []string{"", "wrong", e.token + "x"} {
				resp := httpGet(t, e.bridge.url+wire.Path, tok)
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("token %q: status %d", tok, resp.StatusCode)
				}
			}
		}},
		{"cross-site origin refused", func(t *testing.T) {
			h := http.Header{"Authorization": {"Bearer " + e.token}, "Origin": {"https://evil.example"}}
			_, resp, err := websocket.DefaultDialer.Dial(strings.Replace(e.bridge.url, "http", "ws", 1)+wire.Path, h)
			if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("cross-site origin: %v %v", resp, err)
			}
		}},
		{"bad frames", func(t *testing.T) { badFrames(t, e) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
	}
}

// badFrames sends malformed, binary, unknown and oversized frames on a raw
// connection and checks the answers and that the bridge stays up.
func badFrames(t *testing.T, e *env) {
	h := http.Header{"Authorization": {"Bearer " + e.token}}
	ws, _, err := websocket.DefaultDialer.Dial(strings.Replace(e.bridge.url, "http", "ws", 1)+wire.Path, h)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(startTimeout))
	hello, _ := wire.Marshal(wire.MustNew(wire.TypeHello, "", "h", wire.Hello{Version: wire.Version, Role: wire.RoleClient}))
	ws.WriteMessage(websocket.TextMessage, hello)
	if _, msg, err := ws.ReadMessage(); err != nil || !strings.Contains(string(msg), `"hello"`) {
		t.Fatalf("hello: %s %v", msg, err)
	}
	frames := []struct {
		mt   int
		data string
		code wire.Code
	}{
		{websocket.TextMessage, "{not json", wire.CodeBadMessage},
		{websocket.BinaryMessage, `{"type":"ping","id":"b"}`, wire.CodeBadMessage},
		{websocket.TextMessage, `{"type":"no_such_type","id":"u"}`, wire.CodeUnknownType},
		{websocket.TextMessage, `{"type":"ping","data":"` + strings.Repeat("x", wire.MaxMessageBytes) + `"}`, wire.CodeTooLarge},
	}
	for _, f := range frames {
		ws.WriteMessage(f.mt, []byte(f.data))
		for {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				t.Fatalf("answer to %.30q: %v", f.data, err)
			}
			env, _ := wire.Parse(msg)
			if env.Type != wire.TypeError {
				continue // events of the thread
			}
			var werr wire.Error
			env.Decode(&werr)
			if werr.Code != f.code {
				t.Fatalf("answer to %.30q: %s, want %s", f.data, werr.Code, f.code)
			}
			break
		}
	}
	ws.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("x", 17<<20)))
	for {
		if _, _, err = ws.ReadMessage(); err != nil {
			break
		}
	}
	if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Fatalf("oversized frame: %v, want close 1009", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.bridge.url+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("bridge down after oversized frame: %v", err)
	}
	resp.Body.Close()
}
