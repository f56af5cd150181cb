package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxwire/boxwire/client/chat"

	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/store/pgstore"
	"github.com/boxwire/boxwire/bridge/store/pgstore/pgtest"
	"github.com/boxwire/boxwire/bridge/wire"
)

// postgres starts a real PostgreSQL for the test (pgtest: Debian's
// package, installed when missing, on a loopback port) and returns it and
// the URL of a new, empty database on it.
func postgres(t *testing.T) (*pgtest.Server, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	srv, err := pgtest.Start(ctx)
	if err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
	url, err := srv.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return srv, url
}

// openPG opens the test's own store on the bridge's database, as a second
// bridge would, to look at what the bridge stored.
func openPG(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := pgstore.Open(ctx, url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// A bridge on PostgreSQL (--store postgres://…, no bbolt file): a turn
// runs and its events are in the database; a request is in flight when
// the bridge is killed with SIGKILL and its sandbox removed; the restarted
// bridge, on the same database, replays every event from before with the
// same seqs, resumes the thread in a new sandbox with its conversation,
// and answers the stored request once. The log stays 1..N: nothing lost,
// nothing twice.
func TestStorePostgresRestart(t *testing.T) {
	_, url := postgres(t)
	pg := openPG(t, url)
	e := newEnv(t, faultsScript)
	// A short lease: the restarted bridge waits for the killed one's to
	// run out before it takes the bridge id.
	b := e.startBridge("BOXWIRE_STORE="+url, "BOXWIRE_LEASE_TTL=2s")
	e.cleanAtEnd()
	s := e.dial("")
	thread := s.conn.Thread()
	if _, done := s.turn("please remember the number 42"); done.Reason != wire.ReasonStop {
		t.Fatalf("first turn ended %q", done.Reason)
	}
	before := e.exportSeqs(thread)
	checkConsecutive(t, "before the restart", before)
	if rec, ok, err := pg.Thread(thread); err != nil || !ok || rec.ID != thread {
		t.Fatalf("thread record in PostgreSQL: %+v, %v, %v", rec, ok, err)
	}
	if last, err := pg.LastSeq(thread); err != nil || last != before[len(before)-1] {
		t.Fatalf("LastSeq in PostgreSQL = %d, %v; the bridge exported up to %d", last, err, before[len(before)-1])
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, server.StoreFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the bridge made a bbolt file beside its PostgreSQL store: %v", err)
	}

	id := e.killWithRequestInFlight(b, s, func(question string) {
		waitFor(t, "the request in flight in PostgreSQL", func() bool {
			reqs, err := pg.Inflight(thread)
			return err == nil && slices.ContainsFunc(reqs, func(r wire.Envelope) bool { return strings.Contains(string(r.Data), question) })
		})
	})

	e.startBridge("BOXWIRE_STORE="+url, "BOXWIRE_LEASE_TTL=2s")
	var replayed []uint64
	echoes := e.dial(thread).echoesUntilDone(id, func(ev wire.Envelope) {
		if ev.Seq <= before[len(before)-1] {
			replayed = append(replayed, ev.Seq)
		}
	})
	if !slices.Equal(replayed, before) {
		t.Errorf("replayed after the restart %v; stored before it %v", replayed, before)
	}
	if echoes != 1 {
		t.Errorf("%d user_echo events for the request in flight, want 1", echoes)
	}
	if ok, msgs := e.rememberedIn("remember the number 42", "Noted: the number is 42."); !ok {
		t.Errorf("the resumed thread's model was not sent the earlier conversation; last request: %s", msgs)
	}
	after := e.exportSeqs(thread)
	checkConsecutive(t, "after the restart", after)
	if len(after) <= len(before) {
		t.Errorf("%d events after the restart, %d before", len(after), len(before))
	}
}

// Leases and readiness on PostgreSQL: the bridge holds its id's lease and
// the lease of each thread it relays; a second bridge started with the
// same id on the same database refuses to run; a bridge with another id
// forwards a client of the thread to its relay and starts no second
// sandbox for it; bridge status lists the bridge and its thread; while
// PostgreSQL is down
// GET /readyz answers 503 naming the store, and 200 again once it is back,
// with the leases taken back; a SIGTERM releases them, so the next start
// takes the id at once.
func TestStorePostgresLeasesAndReadiness(t *testing.T) {
	srv, url := postgres(t)
	pg := openPG(t, url)
	e := newEnv(t, faultsScript)
	lease := []string{"BOXWIRE_STORE=" + url, "BOXWIRE_LEASE_TTL=2s"}
	b := e.startBridge(lease...)
	e.cleanAtEnd()
	if code, body := ready(t, e); code != 200 || body != "ready\n" {
		t.Fatalf("GET /readyz = %d %q", code, body)
	}
	s := e.dial("")
	thread := s.conn.Thread()
	if _, done := s.turn("please remember the number 42"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended %q", done.Reason)
	}
	held := func() map[string]string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ls, err := pg.Leases(ctx)
		if err != nil {
			t.Logf("leases: %v", err)
			return nil
		}
		out := map[string]string{}
		for _, l := range ls {
			out[l.Thread] = l.Holder
		}
		return out
	}
	if h := held(); h[thread] != e.id || !strings.HasPrefix(h["bridge/"+e.id], e.id+"/") {
		t.Fatalf("leases %v: want %s held by %s and the bridge's own", h, thread, e.id)
	}
	status, err := exec.Command(bridgeBin, "status", "--store", url).CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^`+e.id+` +\w+ +1 `).Match(status) || !regexp.MustCompile(`(?m)^`+thread+` +`+e.id+` `).Match(status) {
		t.Errorf("bridge status (%v):\n%s\nwant %s relaying 1 thread, %s", err, status, e.id, thread)
	}

	other, err := os.MkdirTemp("", "bw")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(other)
	dup, err := e.launchBridge(append(lease, "BOXWIRE_DATA_DIR="+other)...)
	if err == nil {
		dup.stop(t)
		t.Fatal("a second bridge with the same id started")
	}
	if !strings.Contains(err.Error(), "bridge id in use by another running bridge") {
		t.Fatalf("the second bridge stopped for another reason: %v", err)
	}
	// A bridge with another id on the database forwards a client of the
	// thread to its relay (announced at its listen address): a turn runs
	// through it, and no second sandbox is made.
	peer, err := e.launchBridge(append(lease, "BOXWIRE_DATA_DIR="+other, "BOXWIRE_BRIDGE_ID="+e.id+"-peer")...)
	if err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), startTimeout)
	pc, err := chat.Dial(dctx, chat.Config{URL: peer.url + wire.Path, Token: e.token, Thread: thread})
	dcancel()
	if err != nil {
		t.Fatalf("attach through the peer bridge: %v\n%s", err, peer.logText())
	}
	if _, done := (&session{t: t, conn: pc}).turn("which number did I ask you to remember?"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn through the peer ended %q", done.Reason)
	}
	pc.Close()
	peer.stop(t)
	if !strings.Contains(peer.logText(), "client forwarded to the thread's relay") {
		t.Errorf("the peer did not forward the client:\n%s", peer.logText())
	}
	if n := len(e.containers(map[string]string{"boxwire.thread": thread})); n != 1 {
		t.Errorf("the thread has %d sandboxes after the forwarded turn, want 1", n)
	}
	checkConsecutive(t, "after the forwarded turn", e.exportSeqs(thread))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := srv.Down(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "readyz 503 while PostgreSQL is down", func() bool {
		code, body := ready(t, e)
		return code == 503 && strings.Contains(body, "store: ")
	})
	if err := srv.Up(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "readyz 200 once PostgreSQL is back", func() bool { code, _ := ready(t, e); return code == 200 })
	waitFor(t, "the thread's lease taken back", func() bool { return held()[thread] == e.id })
	if _, done := s.turn("which number did I ask you to remember?"); done.Reason != wire.ReasonStop {
		t.Fatalf("turn after PostgreSQL came back ended %q", done.Reason)
	}
	checkConsecutive(t, "after PostgreSQL came back", e.exportSeqs(thread))

	s.conn.Close()
	b.stop(t)
	if h := held(); h[thread] != "" || h["bridge/"+e.id] != "" {
		t.Fatalf("leases after SIGTERM %v: want none of this bridge's", h)
	}
	nb := e.startBridge(lease...)
	if strings.Contains(nb.logText(), "waiting for it to expire") {
		t.Errorf("the bridge after a SIGTERM waited for its predecessor's lease")
	}
}

// ready asks the bridge's GET /readyz.
func ready(t *testing.T, e *env) (int, string) {
	t.Helper()
	resp, err := http.Get(e.bridge.url + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// checkConsecutive fails t unless seqs are 1, 2, … with no gap or repeat.
func checkConsecutive(t *testing.T, when string, seqs []uint64) {
	t.Helper()
	if len(seqs) == 0 {
		t.Fatalf("%s: no events", when)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("%s: event %d has seq %d (a gap or a repeat): %v", when, i, s, seqs)
		}
	}
}

// killWithRequestInFlight leaves a request in flight across a bridge's
// death: it pauses the sandbox of s's thread so the agent cannot answer,
// sends a question, waits (awaitStored) until the bridge's store keeps it
// as in flight, then kills the bridge with SIGKILL and removes the
// sandbox while it is down. It returns the request's id.
func (e *env) killWithRequestInFlight(b *bridgeProc, s *session, awaitStored func(question string)) string {
	e.t.Helper()
	box := e.containerOf(s.conn.Thread())
	docker(e.t, "pause", box)
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	question := "which number did I ask you to remember? (" + randHex(4) + ")"
	id, err := s.conn.SendMessage(ctx, question)
	if err != nil {
		e.t.Fatal(err)
	}
	// A request not yet written to the agent is not kept: the kill comes
	// once it is in the store.
	awaitStored(question)
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		e.t.Fatal(err)
	}
	<-b.done
	s.conn.Close()
	docker(e.t, "rm", "-f", box)
	return id
}

// echoesUntilDone reads s's events, each also given to seen, until the
// turn_done of request id, and returns how many user_echo events id got.
func (s *session) echoesUntilDone(id string, seen func(wire.Envelope)) int {
	s.t.Helper()
	echoes := 0
	for {
		ev := s.awaitAny(turnTimeout)
		if seen != nil {
			seen(ev)
		}
		if ev.ID != id {
			continue
		}
		if ev.Type == wire.TypeUserEcho {
			echoes++
		}
		if ev.Type == wire.TypeTurnDone {
			return echoes
		}
	}
}

// Three bridges on one database, clients spread over them while output
// streams: each bridge makes a thread (and relays it), each thread is
// watched through all three bridges (two of them forwarding to its relay),
// and a command streams its output through a forwarded client. Every
// watcher sees every seq from 1 to the command's result exactly once, and
// all of its output. Then one bridge restarts: it leaves the threads the
// others relay alone (not marked suspended) and forwards to them again.
func TestStorePostgresThreeBridges(t *testing.T) {
	_, url := postgres(t)
	lease := []string{"BOXWIRE_STORE=" + url, "BOXWIRE_LEASE_TTL=2s"}
	envs := make([]*env, 3)
	for i := range envs {
		envs[i] = newEnv(t, faultsScript)
		if i > 0 {
			envs[i].token = envs[0].token // one credential for every bridge: a forwarded client's
		}
		envs[i].startBridge(lease...)
		envs[i].cleanAtEnd()
	}
	type flow struct {
		thread, id string
		books      []*seqBook
	}
	var flows []flow
	for i, relay := range envs {
		books := []*seqBook{newSeqBook(), newSeqBook(), newSeqBook()}
		w := relay.watch("", 0, books[0]) // the thread is made, and relayed, here
		driver := envs[(i+1)%3].watch(w.thread, 0, books[1])
		envs[(i+2)%3].watch(w.thread, 0, books[2])
		id := driver.run(t, "execute", linesCmd(200, "0.005"))
		flows = append(flows, flow{w.thread, id, books})
	}
	for _, f := range flows {
		for k, b := range f.books {
			res := b.await(t, fmt.Sprintf("tool_result of %s through bridge %d", f.thread, k), turnTimeout, isType(wire.TypeToolResult, f.id))
			if top := b.check(t); top < res.Seq {
				t.Errorf("%s through bridge %d: top seq %d below the result's %d", f.thread, k, top, res.Seq)
			}
			countLines(t, outputOf(b.events(), f.id), 200)
		}
	}
	for _, e := range envs {
		if n := len(e.containers(nil)); n != 1 {
			t.Errorf("bridge %s runs %d sandboxes, want 1 (its own thread's)", e.id, n)
		}
	}
	// A bridge that restarts adopts its own thread and leaves the others'
	// alone: they are not marked suspended, and stay served through it.
	envs[0].bridge.stop(t)
	envs[0].startBridge(lease...)
	pg := openPG(t, url)
	for _, f := range flows {
		if rec, ok, err := pg.Thread(f.thread); err != nil || !ok || rec.Suspended != nil {
			t.Errorf("%s after bridge 0's restart: %+v, %v, %v; want a live record", f.thread, rec, ok, err)
		}
	}
	book := newSeqBook()
	w := envs[0].watch(flows[1].thread, 0, book)
	id := w.run(t, "execute", linesCmd(20, "0.005"))
	book.await(t, "tool_result through the restarted bridge", turnTimeout, isType(wire.TypeToolResult, id))
	book.check(t)
}
