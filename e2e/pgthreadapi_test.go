package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// The threads API answers the same through any bridge on a shared store:
// a thread bridge 0 relays is described by bridge 1 as bridge 0 describes
// it (the request is passed on), listed by bridge 1 with its relay named,
// and deleted through bridge 1 — its sandbox goes. Before, bridge 1
// answered 404 for the thread, listed none and could not delete it. A
// request already passed on once is answered where it lands; a relay that
// cannot be reached is answered 503 sandbox_unavailable naming it. Files
// move through either bridge (before, bridge 1 answered an upload 502
// "connect to that bridge").
func TestStorePostgresThreadAPIThroughAnyBridge(t *testing.T) {
	_, url := postgres(t)
	envs := startBridges(t, 2, helloScript, "BOXWIRE_STORE="+url, "BOXWIRE_LEASE_TTL=30s")
	th := envs[0].createThread(wire.CreateThread{})
	w := envs[0].watch(th.ID, 0, newSeqBook())
	defer w.close()

	direct, via := envs[0].threadInfo(th.ID), envs[1].threadInfo(th.ID)
	if via.SandboxID == "" || via.SandboxID != direct.SandboxID || via.Clients != 1 || via.Status != wire.SandboxRunning {
		t.Errorf("thread info through bridge 1 %+v; want bridge 0's %+v", via, direct)
	}
	var list struct{ Threads []wire.ThreadInfo }
	if code := envs[1].api(http.MethodGet, "/v1/threads", nil, &list); code != http.StatusOK {
		t.Fatalf("list through bridge 1: %d", code)
	}
	if len(list.Threads) != 1 || list.Threads[0].ID != th.ID || list.Threads[0].Relay != envs[0].id || list.Threads[0].Status != wire.SandboxRunning {
		t.Errorf("list through bridge 1: %+v; want the thread, relayed by %s", list.Threads, envs[0].id)
	}
	var own struct{ Threads []wire.ThreadInfo }
	if code := envs[0].api(http.MethodGet, "/v1/threads", nil, &own); code != http.StatusOK || len(own.Threads) != 1 || own.Threads[0].Relay != "" {
		t.Errorf("list through bridge 0: %d %+v; want the thread, no relay named", code, own.Threads)
	}
	// Files move through bridge 1 too: passed on, streaming, with the
	// download's trailer.
	blob := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	if code, body := envs[1].files(http.MethodPut, th.ID, "in/blob.txt", "", blob); code != http.StatusOK || !strings.Contains(body, `"count":1`) {
		t.Fatalf("upload through bridge 1: %d %s", code, body)
	}
	for i, e := range envs {
		if code, body := e.files(http.MethodGet, th.ID, "in/blob.txt", "format=raw", ""); code != http.StatusOK || body != blob {
			t.Errorf("raw download through bridge %d: %d, %d bytes of %d", i, code, len(body), len(blob))
		}
	}
	req, _ := http.NewRequest(http.MethodGet, envs[1].bridge.url+"/v1/threads/"+th.ID+"/files?path=in", nil)
	req.Header.Set("Authorization", "Bearer "+envs[1].token)
	if resp, err := (&http.Client{Timeout: turnTimeout}).Do(req); err != nil {
		t.Errorf("tar download through bridge 1: %v", err)
	} else {
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n <= int64(len(blob)) || !strings.Contains(resp.Trailer.Get("Boxwire-Results"), `"count":1,"bytes":1048576`) {
			t.Errorf("tar download through bridge 1: %d, %d bytes, trailer %q", resp.StatusCode, n, resp.Trailer.Get("Boxwire-Results"))
		}
	}
	if code, body := envs[1].files(http.MethodGet, th.ID, "nowhere", "format=raw", ""); code != http.StatusNotFound || !strings.Contains(body, "file_not_found") {
		t.Errorf("a missing file through bridge 1: %d %s", code, body)
	}

	// Passed on once already: bridge 1 answers itself (it does not relay it).
	if code := envs[1].apiWith(http.MethodGet, "/v1/threads/"+th.ID, map[string]string{"Boxwire-Forwarded-By": "elsewhere"}, nil); code != http.StatusNotFound {
		t.Errorf("a passed-on request for another bridge's thread: %d, want 404 from the bridge it reached", code)
	}

	if code := envs[1].api(http.MethodDelete, "/v1/threads/"+th.ID, nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete through bridge 1: %d, want 204", code)
	}
	waitFor(t, "the thread's sandbox gone", func() bool {
		return len(envs[0].containers(map[string]string{"boxwire.thread": th.ID})) == 0
	})
	if code := envs[0].api(http.MethodGet, "/v1/threads/"+th.ID, nil, nil); code != http.StatusNotFound {
		t.Errorf("thread through bridge 0 after its deletion: %d, want 404", code)
	}

	// A relay killed: its lease stands for 30 s, and bridge 1 cannot reach it.
	other := envs[0].createThread(wire.CreateThread{})
	envs[0].killBridge(t)
	var body struct{ Error wire.Error }
	code := envs[1].apiWith(http.MethodGet, "/v1/threads/"+other.ID, nil, &body)
	if code != http.StatusServiceUnavailable || body.Error.Code != wire.CodeSandboxUnavailable || !strings.Contains(body.Error.Message, envs[0].id) {
		t.Errorf("thread of a dead relay through bridge 1: %d %+v; want 503 sandbox_unavailable naming %s", code, body.Error, envs[0].id)
	}
}

// apiWith is api with extra request headers and no body.
func (e *env) apiWith(method, path string, headers map[string]string, out any) int {
	e.t.Helper()
	req, err := http.NewRequest(method, e.bridge.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: eventTimeout + 10*time.Second}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// files moves a file of thread through e's bridge (PUT with body, or GET
// with the query q) and returns the status and the body.
func (e *env) files(method, thread, path, q, body string) (int, string) {
	e.t.Helper()
	u := e.bridge.url + "/v1/threads/" + thread + "/files?path=" + path
	if q != "" {
		u += "&" + q
	}
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := (&http.Client{Timeout: turnTimeout}).Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read: %v", method, u, err)
	}
	return resp.StatusCode, string(raw)
}

// A thread's ports are previewed through any bridge on a shared store by
// the path form: the ports list, a file, a 1 MiB file and a WebSocket
// through bridge 1 of a thread bridge 0 relays (passed on). Before,
// bridge 1 answered 503: the thread had no running sandbox there.
func TestStorePostgresPreviewThroughAnyBridge(t *testing.T) {
	_, url := postgres(t)
	envs := startBridges(t, 2, forwardScript(), "BOXWIRE_STORE="+url, "BOXWIRE_LEASE_TTL=30s")
	s := envs[0].dial("")
	id := s.conn.Thread()
	if _, done := s.turn("serve the site"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended %q", done.Reason)
	}
	s.awaitPorts(8000, 8001)
	via := envs[1]
	var ports struct{ Ports []wire.Port }
	if code, raw := via.call(via.token, http.MethodGet, "/v1/threads/"+id+"/ports", nil); code != http.StatusOK || json.Unmarshal(raw, &ports) != nil || len(ports.Ports) < 2 {
		t.Fatalf("ports through bridge 1: %d %s", code, raw)
	}
	if code, body := previewGet(t, via.bridge.url, "/v1/threads/"+id+"/ports/8000/hello.txt", "", via.token); code != http.StatusOK || body != "preview works\n" {
		t.Fatalf("path form through bridge 1: %d %q", code, body)
	}
	direct, a := previewGet(t, envs[0].bridge.url, "/v1/threads/"+id+"/ports/8000/blob.bin", "", envs[0].token)
	code, b := previewGet(t, via.bridge.url, "/v1/threads/"+id+"/ports/8000/blob.bin", "", via.token)
	if direct != http.StatusOK || code != http.StatusOK || len(b) != 1<<20 || a != b {
		t.Fatalf("1 MiB through bridge 1: %d, %d bytes, same as through bridge 0: %v", code, len(b), a == b)
	}
	d := websocket.Dialer{HandshakeTimeout: startTimeout}
	ws, _, err := d.Dial("ws"+strings.TrimPrefix(via.bridge.url, "http")+"/v1/threads/"+id+"/ports/8001/ws", http.Header{"Authorization": {"Bearer " + via.token}})
	if err != nil {
		t.Fatalf("WebSocket through bridge 1: %v", err)
	}
	defer ws.Close()
	if err := ws.WriteMessage(websocket.TextMessage, []byte("reload?")); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(turnTimeout))
	if _, data, err := ws.ReadMessage(); err != nil || string(data) != "echo: reload?" {
		t.Fatalf("WebSocket through bridge 1: echo %q %v", data, err)
	}
}
