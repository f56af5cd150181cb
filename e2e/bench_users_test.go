package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// benchNotYours: another user's thread must not be told apart from one
// that does not exist (issue 17), by its answer or by how long the answer
// takes. Bob asks for Alice's thread and for a thread never made,
// interleaved, over one kept-alive connection; the figure is the ratio of
// the two medians.
func benchNotYours(t *testing.T, e *env, r *report) {
	const rounds = 4000
	alice, bob := e.newUser("bench-alice"), e.newUser("bench-bob")
	code, body := e.call(alice, http.MethodPost, "/v1/threads", map[string]any{})
	var theirs wire.ThreadInfo
	if code != http.StatusCreated || json.Unmarshal(body, &theirs) != nil {
		t.Fatalf("alice creates a thread: %d %s", code, body)
	}
	defer e.call(e.token, http.MethodDelete, "/v1/threads/"+theirs.ID, nil)
	const ghost = "t_000000000000"
	get := func(id string) func() time.Duration {
		return func() time.Duration {
			began := time.Now()
			code, body := e.call(bob, http.MethodGet, "/v1/threads/"+id, nil)
			took := time.Since(began)
			if code != http.StatusNotFound {
				t.Fatalf("bob GET %s: %d %s, want 404", id, code, body)
			}
			return took
		}
	}
	for range 200 { // warm up both paths
		get(theirs.ID)()
		get(ghost)()
	}
	other, missing := interleave(t, rounds, get(theirs.ID), get(ghost))
	ratio := medianMS(other) / medianMS(missing)
	r.add(figure{name: "not_yours_vs_missing", value: medianMS(other), unit: "ms", ratio: ratio, samples: msOf(other),
		target: "0.95–1.05 of a missing thread's time at the median", met: met(ratio >= 0.95 && ratio <= 1.05),
		note: fmt.Sprintf("GET another user's thread median %.3f ms (p90 %.3f) vs a missing thread %.3f ms (p90 %.3f), %d rounds interleaved",
			medianMS(other), percentileMS(other, 90), medianMS(missing), percentileMS(missing, 90), rounds)})
}
