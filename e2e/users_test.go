package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// call sends an HTTP request to the bridge with credential and returns the
// status and body.
func (e *env) call(credential, method, path string, body any) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.bridge.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+credential)
	resp, err := (&http.Client{Timeout: startTimeout + turnTimeout}).Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// newUser adds a user through the admin API and returns a key of theirs.
func (e *env) newUser(name string) string {
	e.t.Helper()
	if code, body := e.call(e.token, http.MethodPost, "/v1/users", map[string]any{"name": name}); code != http.StatusCreated {
		e.t.Fatalf("add user %s: %d %s", name, code, body)
	}
	code, body := e.call(e.token, http.MethodPost, "/v1/users/"+name+"/keys", map[string]any{"name": "test"})
	var created struct {
		Key    string `json:"key"`
		Stored struct {
			ID string `json:"id"`
		} `json:"stored"`
	}
	if code != http.StatusCreated || json.Unmarshal(body, &created) != nil || !strings.HasPrefix(created.Key, "bwk_") {
		e.t.Fatalf("create key for %s: %d %s", name, code, body)
	}
	return created.Key
}

// hello opens a WebSocket with credential and says hello for thread; it
// returns the first answer's type and error code, and the close code.
func (e *env) hello(credential, thread string) (wire.Type, wire.Code, int) {
	e.t.Helper()
	url := "ws" + strings.TrimPrefix(e.bridge.url, "http") + wire.Path
	c, _, err := websocket.DefaultDialer.Dial(url, http.Header{"Authorization": {"Bearer " + credential}})
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	c.WriteJSON(wire.MustNew(wire.TypeHello, thread, "h", wire.Hello{Version: wire.Version, Role: wire.RoleClient, Thread: thread}))
	c.SetReadDeadline(time.Now().Add(turnTimeout))
	var env wire.Envelope
	if err := c.ReadJSON(&env); err != nil {
		e.t.Fatalf("hello answer: %v", err)
	}
	var werr wire.Error
	_ = env.Decode(&werr)
	closeCode := 0
	if _, _, err := c.ReadMessage(); err != nil {
		var ce *websocket.CloseError
		if ok := asCloseError(err, &ce); ok {
			closeCode = ce.Code
		}
	}
	return env.Type, werr.Code, closeCode
}

func asCloseError(err error, ce **websocket.CloseError) bool {
	c, ok := err.(*websocket.CloseError)
	if ok {
		*ce = c
	}
	return ok
}

// TestUsersOwnership: two users and an admin against every endpoint and
// the WebSocket hello that name a thread. A thread is its owner's and the
// admins'; to anyone else it does not exist — status and body equal to a
// thread that was never made. The audit log says who did what.
func TestUsersOwnership(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge()
	e.cleanAtEnd()
	alice, bob := e.newUser("alice"), e.newUser("bob")

	code, body := e.call(alice, http.MethodPost, "/v1/threads", map[string]any{})
	var mine wire.ThreadInfo
	if code != http.StatusCreated || json.Unmarshal(body, &mine) != nil || mine.Owner != "alice" {
		t.Fatalf("alice creates a thread: %d %s", code, body)
	}
	const ghost = "t_000000000000" // never made
	routes := []struct{ method, path string }{
		{http.MethodGet, "/v1/threads/%s"},
		{http.MethodPatch, "/v1/threads/%s"},
		{http.MethodGet, "/v1/threads/%s/events?after=0"},
		{http.MethodGet, "/v1/threads/%s/files?path=x"},
		{http.MethodPut, "/v1/threads/%s/files?path=x"},
		{http.MethodDelete, "/v1/threads/%s"},
	}
	for _, rt := range routes {
		p := func(id string) string { return strings.Replace(rt.path, "%s", id, 1) }
		body := map[string]any{"egress": []string{}}
		gc, gb := e.call(bob, rt.method, p(ghost), body)
		oc, ob := e.call(bob, rt.method, p(mine.ID), body)
		ob = bytes.ReplaceAll(ob, []byte(mine.ID), []byte(ghost))
		if oc != http.StatusNotFound || oc != gc || !bytes.Equal(ob, gb) {
			t.Errorf("bob %s %s: %d %s; a thread that does not exist: %d %s", rt.method, rt.path, oc, ob, gc, gb)
		}
	}
	// The WebSocket hello: another's thread is refused as a missing one.
	if typ, code, cl := e.hello(bob, mine.ID); typ != wire.TypeError || code != wire.CodeNotFound {
		t.Errorf("bob's hello for alice's thread: %s %s close %d", typ, code, cl)
	}
	gtyp, gcode, gcl := e.hello(bob, ghost)
	if typ, code, cl := e.hello(bob, mine.ID); typ != gtyp || code != gcode || cl != gcl {
		t.Errorf("bob's hello for alice's thread differs from a missing one: %s %s %d vs %s %s %d", typ, code, cl, gtyp, gcode, gcl)
	}
	// Lists: each sees their own; the admin sees all and filters by owner.
	list := func(cred, q string) []string {
		_, b := e.call(cred, http.MethodGet, "/v1/threads"+q, nil)
		var l wire.ThreadList
		json.Unmarshal(b, &l)
		var ids []string
		for _, ti := range l.Threads {
			ids = append(ids, ti.ID+"@"+ti.Owner)
		}
		return ids
	}
	if got := list(bob, ""); len(got) != 0 {
		t.Errorf("bob lists %v", got)
	}
	if got := list(alice, ""); len(got) != 1 || got[0] != mine.ID+"@alice" {
		t.Errorf("alice lists %v", got)
	}
	if got := list(e.token, "?owner=alice"); len(got) != 1 {
		t.Errorf("admin lists alice's: %v", got)
	}
	// Admin-only routes refuse users.
	if code, _ := e.call(bob, http.MethodGet, "/v1/users", nil); code != http.StatusForbidden {
		t.Errorf("bob lists users: %d", code)
	}
	// Alice uses her thread; the admin may too.
	if code, _ := e.call(alice, http.MethodGet, "/v1/threads/"+mine.ID, nil); code != http.StatusOK {
		t.Errorf("alice gets her thread: %d", code)
	}
	if code, _ := e.call(e.token, http.MethodGet, "/v1/threads/"+mine.ID+"/events?after=0", nil); code != http.StatusOK {
		t.Errorf("admin exports alice's thread: %d", code)
	}
	s := e.dialWith(alice, mine.ID)
	if _, done := s.turn("hello"); done.Reason != wire.ReasonStop {
		t.Errorf("alice's turn ended %q", done.Reason)
	}
	s.conn.Close()
	// A request that names another thread inside its envelope acts on the
	// sender's own thread: bob, attached to his, sends run_tool naming
	// alice's; the command runs in bob's sandbox, never in alice's.
	bs := e.dialWith(bob, "")
	raw, _ := json.Marshal(map[string]any{"command": "touch /workspace/bob-was-here", "timeout": 30})
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	if err := bs.conn.Send(ctx, wire.MustNew(wire.TypeRunTool, mine.ID, "rt-cross", wire.RunTool{Name: "execute", Arguments: raw})); err != nil {
		t.Fatal(err)
	}
	for res := bs.awaitEvent(wire.TypeToolResult); res.ID != "rt-cross"; res = bs.awaitEvent(wire.TypeToolResult) {
	}
	if out := dockerExec(t, mine.SandboxID, "sh", "-c", "test -e /workspace/bob-was-here && echo FOUND || echo absent"); strings.TrimSpace(out) != "absent" {
		t.Errorf("bob's command ran in alice's sandbox: %q", out)
	}
	if out := dockerExec(t, e.containerOf(bs.conn.Thread()), "sh", "-c", "test -e /workspace/bob-was-here && echo FOUND"); strings.TrimSpace(out) != "FOUND" {
		t.Errorf("bob's command did not run in his own sandbox: %q", out)
	}
	bs.conn.Close()
	if code, _ := e.call(alice, http.MethodDelete, "/v1/threads/"+mine.ID, nil); code != http.StatusNoContent {
		t.Errorf("alice deletes her thread: %d", code)
	}
	code, body = e.call(e.token, http.MethodGet, "/v1/audit?user=alice", nil)
	for _, want := range []string{`"thread.create"`, `"thread.attach"`, `"thread.delete"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("audit (%d) lacks %s: %s", code, want, body)
		}
	}
	if strings.Contains(string(body), `"user":"bob"`) {
		t.Errorf("filtered audit shows bob: %s", body)
	}
}

// dialWith opens a chat connection with credential.
func (e *env) dialWith(credential, thread string) *session {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	conn, err := chat.Dial(ctx, chat.Config{URL: e.bridge.url + wire.Path, Token: credential, Thread: thread})
	if err != nil {
		e.t.Fatalf("dial bridge: %v", err)
	}
	e.t.Cleanup(func() { conn.Close() })
	return &session{t: e.t, conn: conn}
}

// TestUsersRevocationAndQuota: revoking a key closes its connection within
// a second, in the middle of a streaming turn, and refuses its next
// request; a user's sandboxes-at-a-time limit refuses a thread past it with
// quota_exceeded and frees up when one is deleted; many wrong keys from one
// address hold that address back without slowing another.
func TestUsersRevocationAndQuota(t *testing.T) {
	e := newEnv(t, `{"model":"scripted","turns":[
	  {"when":"tell a story","steps":[{"content":"once upon a time a key was revoked while this story was still being told, word after word, slowly, so that the revocation would arrive in the middle of it","chunk_delay_ms":200}]},
	  {"steps":[{"content":"ok"}]}]}`)
	e.startBridge("BOXWIRE_USER_MAX_SANDBOXES=1")
	e.cleanAtEnd()
	carol := e.newUser("carol")
	_, keysBody := e.call(e.token, http.MethodGet, "/v1/keys?user=carol", nil)
	var keys struct {
		Keys []struct{ ID string } `json:"keys"`
	}
	json.Unmarshal(keysBody, &keys)
	if len(keys.Keys) != 1 {
		t.Fatalf("carol's keys: %s", keysBody)
	}

	s := e.dialWith(carol, "")
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	if err := s.conn.Send(ctx, wire.MustNew(wire.TypeUserMessage, s.conn.Thread(), "m1", wire.UserMessage{Text: "tell a story"})); err != nil {
		t.Fatal(err)
	}
	s.awaitEvent(wire.TypeAssistantDelta) // the turn streams
	// Quota: carol's one sandbox is in use.
	if code, body := e.call(carol, http.MethodPost, "/v1/threads", map[string]any{}); code != http.StatusTooManyRequests || !strings.Contains(string(body), "quota_exceeded") {
		t.Errorf("carol's second thread: %d %s", code, body)
	}
	start := time.Now()
	if code, body := e.call(e.token, http.MethodDelete, "/v1/keys/"+keys.Keys[0].ID, nil); code != http.StatusOK {
		t.Fatalf("revoke: %d %s", code, body)
	}
	closed := false
	for !closed {
		select {
		case _, ok := <-s.conn.Events():
			closed = !ok
		case <-time.After(5 * time.Second):
			t.Fatal("the revoked key's connection is still open after 5 s")
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the revoked key's connection closed after %v, want within a second", took)
	}
	if code, _ := e.call(carol, http.MethodGet, "/v1/threads", nil); code != http.StatusUnauthorized {
		t.Errorf("the revoked key's next request: %d", code)
	}
	// The quota frees up: the admin deletes carol's thread, a new key makes one.
	e.call(e.token, http.MethodDelete, "/v1/threads/"+s.conn.Thread(), nil)
	code, body := e.call(e.token, http.MethodPost, "/v1/users/carol/keys", map[string]any{})
	var created struct{ Key string }
	if code != http.StatusCreated || json.Unmarshal(body, &created) != nil {
		t.Fatalf("a new key for carol: %d %s", code, body)
	}
	if code, body = e.call(created.Key, http.MethodPost, "/v1/threads", map[string]any{}); code != http.StatusCreated {
		t.Errorf("carol's thread after the first was deleted: %d %s", code, body)
	}

	// Brute force from 127.0.0.2: held back; 127.0.0.1 is not slowed.
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	}
	try := func(c *http.Client, cred string) int {
		req, _ := http.NewRequest(http.MethodGet, e.bridge.url+"/v1/threads", nil)
		req.Header.Set("Authorization", "Bearer "+cred)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("request: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	attacker, other := from("127.0.0.2"), from("127.0.0.1")
	for range 25 {
		try(attacker, "bwk_000000000000_"+strings.Repeat("0", 64))
	}
	if code := try(attacker, e.token); code != http.StatusTooManyRequests {
		t.Errorf("the guessing address with the right token: %d, want 429", code)
	}
	start = time.Now()
	if code := try(other, e.token); code != http.StatusOK || time.Since(start) > 5*time.Second {
		t.Errorf("another address: %d after %v", code, time.Since(start))
	}
}

// TestUsersCommands: `bridge users`, `bridge keys` and `bridge audit` work
// through a running bridge's admin API, and on the store when no bridge
// runs; `client whoami` names the key's user.
func TestUsersCommands(t *testing.T) {
	e := newEnv(t, helloScript)
	b := e.startBridge()
	e.cleanAtEnd()
	run := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bridgeBin, args...)
		cmd.Env = append(os.Environ(), append([]string{"BOXWIRE_DATA_DIR=" + e.dataDir}, env...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bridge %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	online := []string{"BOXWIRE_URL=" + b.url, "BOXWIRE_TOKEN=" + e.token}
	run(online, "users", "add", "dave")
	out := run(online, "keys", "create", "dave", "--name", "laptop", "--expires", "24h")
	key := strings.Fields(out)[0]
	if !strings.HasPrefix(key, "bwk_") {
		t.Fatalf("keys create printed %q", out)
	}
	if out := run(online, "keys", "list"); !strings.Contains(out, "dave") || !strings.Contains(out, "laptop") || strings.Contains(out, key) {
		t.Fatalf("keys list (the secret must not show):\n%s", out)
	}
	who := exec.Command(clientBinary(t), "--url", b.url, "--token", key, "whoami")
	if out, err := who.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "dave ") {
		t.Fatalf("client whoami: %v %s", err, out)
	}
	b.stop(t)
	// No bridge runs: the commands work on the store, and what they did
	// is there when the bridge starts again.
	run(nil, "users", "add", "erin", "--admin")
	if out := run(nil, "users", "list"); !strings.Contains(out, "dave") || !strings.Contains(out, "erin") {
		t.Fatalf("users list offline:\n%s", out)
	}
	if out := run(nil, "audit", "--action", "key.create"); !strings.Contains(out, "key.create") {
		t.Fatalf("audit offline:\n%s", out)
	}
	nb := e.startBridge()
	if code, _ := e.call(key, http.MethodGet, "/v1/users/me", nil); code != http.StatusOK {
		t.Fatalf("dave's key after the restart: %d (bridge %s)", code, nb.url)
	}
}

// TestUsersTokenQuota: once a user's sandboxes used their model tokens for
// the day, the next model call is refused (the turn ends with an error
// that says so); an admin's turn still runs.
func TestUsersTokenQuota(t *testing.T) {
	e := newEnv(t, helloScript)
	e.startBridge("BOXWIRE_USER_TOKENS_PER_DAY=1")
	e.cleanAtEnd()
	frank := e.newUser("frank")
	s := e.dialWith(frank, "")
	// helloScript answers other words with one model call: the first
	// starts under the limit and spends it, the next is refused.
	if _, done := s.turn("hi"); done.Reason != wire.ReasonStop {
		t.Fatalf("frank's first turn ended %q", done.Reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	refused := false
	done, err := s.conn.Run(ctx, "hi again", func(ev wire.Envelope) {
		refused = refused || ev.Type == wire.TypeError && strings.Contains(string(ev.Data), "model tokens today")
	})
	if done.Reason != wire.ReasonError || !refused || err == nil || !strings.Contains(err.Error(), "quota_exceeded") {
		t.Errorf("frank's turn past his daily tokens ended %q (%v); refusal seen: %v", done.Reason, err, refused)
	}
	var me struct {
		Usage struct {
			TokensToday int64 `json:"tokens_today"`
		} `json:"usage"`
	}
	_, body := e.call(frank, http.MethodGet, "/v1/users/me", nil)
	if json.Unmarshal(body, &me) != nil || me.Usage.TokensToday < 1 {
		t.Errorf("frank's usage: %s", body)
	}
	if _, done := e.dial("").turn("hi"); done.Reason != wire.ReasonStop {
		t.Errorf("the admin's turn ended %q", done.Reason)
	}
}
