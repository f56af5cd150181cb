package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/store/pgstore"
	"github.com/boxwire/boxwire/bridge/store/pgstore/pgtest"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// Sizes of the append figure.
const (
	appendEvents = 50000 // events one round appends to one thread's log
	appendRounds = 5
	// appendSync is the bridge's default --store-sync: commits do not
	// wait for fsync (bbolt syncs the file this often; PostgreSQL commits
	// with synchronous_commit off).
	appendSync = 100 * time.Millisecond
)

// benchPG is the run's PostgreSQL server with fsync on (pgtest, Debian's
// package, installed when missing), started by the first figure that needs
// it and stopped when the run ends.
var benchPG = struct {
	once sync.Once
	srv  *pgtest.Server
	err  error
}{}

// benchDatabase returns the URL of a new database on the run's server.
func benchDatabase(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	benchPG.once.Do(func() {
		benchPG.srv, benchPG.err = pgtest.StartConfig(ctx, pgtest.Config{Durable: true})
		if benchPG.err == nil {
			t.Cleanup(func() {
				if err := benchPG.srv.Stop(); err != nil {
					t.Errorf("stop PostgreSQL: %v", err)
				}
			})
		}
	})
	if benchPG.err != nil {
		t.Fatalf("start PostgreSQL: %v", benchPG.err)
	}
	url, err := benchPG.srv.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// appendSide is one store appending to one thread's log, as the bridge
// does (bridge/server/events.go: Append with the seq it numbered, a
// callback per event).
type appendSide struct {
	st     store.Backend
	thread string
	seq    uint64
}

// round appends appendEvents streamed fragments without waiting between
// them and returns how long until the last one was committed: the rate
// the store's writer takes one thread's events at, batching what queued
// while it committed.
func (a *appendSide) round(t *testing.T) time.Duration {
	env := wire.MustNew(wire.TypeAssistantDelta, a.thread, "m1", wire.Text{Text: "a fragment of a streamed answer, forty-odd bytes"})
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	wg.Add(appendEvents)
	done := func(err error) {
		if err != nil && failed.Add(1) == 1 {
			firstErr.Store(err)
		}
		wg.Done()
	}
	start := time.Now()
	for range appendEvents {
		a.seq++
		env.Seq = a.seq
		a.st.Append(a.thread, env, done)
	}
	wg.Wait()
	took := time.Since(start)
	if n := failed.Load(); n > 0 {
		t.Fatalf("append to %s: %d of %d failed, the first: %v", a.thread, n, appendEvents, firstErr.Load())
	}
	return took
}

// benchAppend: events appended per second to one thread's log, for both
// stores with and without waiting for fsync, the four sides taking turns
// round by round (the first changing every round). The stores are opened
// here, in the test's process, as the bridge opens them; PostgreSQL runs
// with fsync on. Every event must be stored.
func benchAppend(t *testing.T, _ *env, r *report) {
	dir := t.TempDir()
	url := benchDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := []struct {
		name, target string
		open         func() (store.Backend, error)
	}{
		{"append_bbolt_nowait", "≥ 50,000/s", func() (store.Backend, error) {
			return store.Open(filepath.Join(dir, "nowait.db"), store.Options{SyncInterval: appendSync})
		}},
		{"append_bbolt_fsync", "", func() (store.Backend, error) {
			return store.Open(filepath.Join(dir, "fsync.db"), store.Options{})
		}},
		{"append_pg_nowait", "≥ 50,000/s", func() (store.Backend, error) {
			return pgstore.Open(ctx, url, store.Options{SyncInterval: appendSync})
		}},
		{"append_pg_fsync", "", func() (store.Backend, error) { return pgstore.Open(ctx, url, store.Options{}) }},
	}
	sides := make([]*appendSide, len(open))
	for i, o := range open {
		st, err := o.open()
		if err != nil {
			t.Fatalf("%s: open the store: %v", o.name, err)
		}
		defer st.Close()
		thread := fmt.Sprintf("t_append%d", i) // one thread each: the PostgreSQL sides share a database
		if err := st.PutThread(store.Thread{ID: thread, Scope: wire.ScopeThread, Image: image, Created: time.Now()}); err != nil {
			t.Fatalf("%s: store the thread: %v", o.name, err)
		}
		sides[i] = &appendSide{st: st, thread: thread}
		sides[i].round(t) // warm up: the files grow, the connections open
	}
	took := make([][]time.Duration, len(sides))
	for round := range appendRounds {
		for k := range sides {
			i := (round + k) % len(sides)
			took[i] = append(took[i], sides[i].round(t))
		}
	}
	rate := func(d time.Duration) float64 { return appendEvents / d.Seconds() }
	for i, o := range open {
		a := sides[i]
		if last, err := a.st.LastSeq(a.thread); err != nil || last != a.seq {
			t.Fatalf("%s: the log ends at %d (%v), %d appended", o.name, last, err, a.seq)
		}
		rates := perRound(took[i], rate)
		f := figure{name: o.name, value: rate(time.Duration(medianMS(took[i]) * float64(time.Millisecond))), unit: "events/s",
			samples: rates, target: o.target,
			note: fmt.Sprintf("%d events (%s, seq given) appended to one thread's log without waiting, until the last committed; median of %d rounds, the four sides in turn",
				appendEvents, wire.TypeAssistantDelta, appendRounds)}
		if o.target != "" {
			f.met = met(f.value >= 50000)
		}
		r.add(f)
	}
}

// benchRelayPG: the relay figure (a ping answered by the agent, through
// the bridge and straight to its socket) for a bridge on PostgreSQL
// (--store postgres://…) and, beside it in the same rounds, one on bbolt;
// and a tool round trip through each (run_tool ls: its tool_call and
// tool_result are committed to the store before the client gets them).
func benchRelayPG(t *testing.T, e *env, r *report) {
	const rounds = 1000
	pg := newEnv(t, helloScript)
	pg.startBridge("BOXWIRE_MAX_SANDBOXES=0", "BOXWIRE_STORE="+benchDatabase(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	type bridge struct {
		via, direct *chat.Conn
		n           int
	}
	open := func(e *env) *bridge {
		s := e.dial("")
		direct, err := chat.Dial(ctx, chat.Config{URL: "unix:" + e.agentSocket(s.conn.Thread()), Thread: s.conn.Thread()})
		if err != nil {
			t.Fatalf("dial the agent directly: %v", err)
		}
		t.Cleanup(func() { direct.Close() })
		return &bridge{via: s.conn, direct: direct}
	}
	ping := func(c *chat.Conn) func() time.Duration { return timedPing(t, ctx, c) }
	ls := func(b *bridge) func() time.Duration {
		return func() time.Duration {
			b.n++
			start := time.Now()
			res, err := runTool(ctx, b.via, fmt.Sprintf("ls%d", b.n), "ls", map[string]any{"path": "."})
			if err != nil || res.Error != "" {
				t.Fatalf("ls through the bridge: %+v, %v", res, err)
			}
			return time.Since(start)
		}
	}
	bb, pb := open(e), open(pg)
	sides := []func() time.Duration{ping(bb.via), ping(bb.direct), ping(pb.via), ping(pb.direct), ls(bb), ls(pb)}
	for _, side := range sides { // warm up every path
		for range 50 {
			side()
		}
	}
	got := make([][]time.Duration, len(sides))
	for round := range rounds {
		for k := range sides {
			i := (round + k) % len(sides)
			got[i] = append(got[i], sides[i]())
		}
	}
	boltAdded := medianMS(got[0]) - medianMS(got[1])
	pgAdded := medianMS(got[2]) - medianMS(got[3])
	r.add(figure{name: "relay_added_bbolt", value: boltAdded, unit: "ms", samples: addedMS(got[0], got[1]),
		note: fmt.Sprintf("ping median %.3f ms via a bridge on bbolt vs %.3f ms to its agent, %d rounds beside the PostgreSQL bridge's", medianMS(got[0]), medianMS(got[1]), rounds)})
	r.add(figure{name: "relay_added_pg", value: pgAdded, unit: "ms", samples: addedMS(got[2], got[3]),
		target: "≤ 0.5 ms added at the median", met: met(pgAdded <= 0.5),
		note: fmt.Sprintf("ping median %.3f ms via a bridge on PostgreSQL vs %.3f ms to its agent, %d rounds beside the bbolt bridge's", medianMS(got[2]), medianMS(got[3]), rounds)})
	r.add(figure{name: "tool_roundtrip_bbolt", value: medianMS(got[4]), unit: "ms", samples: msOf(got[4]),
		note: "run_tool ls through a bridge on bbolt (its two events committed before the client sees them), median"})
	r.add(figure{name: "tool_roundtrip_pg", value: medianMS(got[5]), unit: "ms", samples: msOf(got[5]), ratio: medianMS(got[5]) / medianMS(got[4]),
		note: fmt.Sprintf("the same through a bridge on PostgreSQL (fsync on, --store-sync default: synchronous_commit off), median; ratio to bbolt's %.3f ms", medianMS(got[4]))})
}
