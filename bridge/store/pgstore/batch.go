package pgstore

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boxwire/boxwire/bridge/store"
)

// The statements of one batch; each takes arrays, so a batch costs one
// round trip whatever its size.
const (
	insertEventsSQL = `INSERT INTO events (thread, seq, size, envelope)
SELECT t, s, z, e::json FROM unnest($1::text[], $2::bigint[], $3::int[], $4::text[]) AS v(t, s, z, e)
ON CONFLICT (thread, seq) DO UPDATE SET size = excluded.size, envelope = excluded.envelope`
	updateLogsSQL = `UPDATE thread_logs l SET last_seq = v.s, activity = $3
FROM unnest($1::text[], $2::bigint[]) AS v(t, s) WHERE l.thread = v.t`
	putCursorsSQL = `INSERT INTO agent_cursors (thread, cursor)
SELECT t, c::json FROM unnest($1::text[], $2::text[]) AS v(t, c)
ON CONFLICT (thread) DO UPDATE SET cursor = excluded.cursor`
	putInflightSQL = `INSERT INTO inflight (thread, requests)
SELECT t, r::json FROM unnest($1::text[], $2::text[]) AS v(t, r)
ON CONFLICT (thread) DO UPDATE SET requests = excluded.requests`
	dropInflightSQL = `DELETE FROM inflight WHERE thread = ANY($1)`
)

// eventRows are the columns of the events one batch writes, one event
// per (thread, seq): a later append of the same seq replaces an earlier
// one, as in a key/value store.
type eventRows struct {
	threads []string
	seqs    []int64
	sizes   []int32
	data    []string
	at      map[eventKey]int
}

type eventKey struct {
	thread string
	seq    uint64
}

func (r *eventRows) add(thread string, seq uint64, data string) {
	k := eventKey{thread, seq}
	if i, ok := r.at[k]; ok {
		r.sizes[i], r.data[i] = int32(len(data)), data
		return
	}
	r.at[k] = len(r.threads)
	r.threads = append(r.threads, thread)
	r.seqs = append(r.seqs, int64(seq))
	r.sizes = append(r.sizes, int32(len(data)))
	r.data = append(r.data, data)
}

// writes numbers batch's AppendNext events from last (the threads'
// newest committed seqs, locked) and returns the statements that write
// batch, leaving out the threads in dropped.
func writes(batch []store.Item, last map[string]uint64, dropped map[string]error, now time.Time) (*pgx.Batch, error) {
	ev := eventRows{at: map[eventKey]int{}}
	newest := map[string]uint64{} // threads with events: their newest seq
	cursors := map[string]string{}
	lists := map[string]string{}
	var drop []string
	for i := range batch {
		it := &batch[i]
		if dropped[it.Thread] != nil {
			continue
		}
		switch {
		case it.Cursor != nil:
			data, err := encodeJSON(it.Cursor)
			if err != nil {
				return nil, fmt.Errorf("encode agent cursor of %s: %w", it.Thread, err)
			}
			cursors[it.Thread] = data // the newest wins
		case it.Inflight != nil:
			if len(*it.Inflight) == 0 {
				lists[it.Thread] = ""
				continue
			}
			data, err := encodeJSON(*it.Inflight)
			if err != nil {
				return nil, fmt.Errorf("encode requests in flight of %s: %w", it.Thread, err)
			}
			lists[it.Thread] = data
		default:
			if it.Next != nil {
				it.Env.Seq = last[it.Thread] + 1
			}
			data, err := encodeJSON(it.Env)
			if err != nil {
				return nil, fmt.Errorf("encode event %d of %s: %w", it.Env.Seq, it.Thread, err)
			}
			ev.add(it.Thread, it.Env.Seq, data)
			last[it.Thread] = max(last[it.Thread], it.Env.Seq)
			newest[it.Thread] = last[it.Thread]
		}
	}
	b := &pgx.Batch{}
	if len(ev.threads) > 0 {
		b.Queue(insertEventsSQL, ev.threads, ev.seqs, ev.sizes, ev.data)
		var ts []string
		var ss []int64
		for t, s := range newest {
			ts, ss = append(ts, t), append(ss, int64(s))
		}
		b.Queue(updateLogsSQL, ts, ss, now)
		b.Queue(notifySQL, ts, ss) // listen.go
	}
	if len(cursors) > 0 {
		ts, cs := columns(cursors)
		b.Queue(putCursorsSQL, ts, cs)
	}
	var keep = map[string]string{}
	for t, l := range lists {
		if l == "" {
			drop = append(drop, t)
		} else {
			keep[t] = l
		}
	}
	if len(keep) > 0 {
		ts, ls := columns(keep)
		b.Queue(putInflightSQL, ts, ls)
	}
	if len(drop) > 0 {
		b.Queue(dropInflightSQL, drop)
	}
	return b, nil
}

// columns splits m into two parallel arrays.
func columns(m map[string]string) (ks, vs []string) {
	for k, v := range m {
		ks, vs = append(ks, k), append(vs, v)
	}
	return ks, vs
}
