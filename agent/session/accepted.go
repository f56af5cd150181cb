package session

import (
	"slices"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Idempotent requests (docs/resume.md, "Requests in flight"): a bridge
// that restarted or reconnected sends again the user_message and run_tool
// requests it wrote but never saw answered. The thread remembers the ids
// of the newest requests from a bridge it accepted (started a turn or a
// run_tool for) and answers a repeated one with TypeAccepted instead of
// running it twice. Only a bridge's requests are remembered: it gives
// every one a unique id, while a client may use an id again.

// maxAccepted bounds the remembered ids per thread.
const maxAccepted = 256

// acceptedIDs is a bounded set of request ids, oldest dropped first. The
// thread's mutex guards it.
type acceptedIDs struct {
	order []string
	set   map[string]bool
}

func (a *acceptedIDs) has(id string) bool { return a.set[id] }

func (a *acceptedIDs) add(id string) {
	if a.set == nil {
		a.set = map[string]bool{}
	}
	if a.set[id] {
		return
	}
	a.set[id] = true
	a.order = append(a.order, id)
	if len(a.order) > maxAccepted {
		delete(a.set, a.order[0])
		a.order = slices.Delete(a.order, 0, 1)
	}
}

// dedupes reports whether c's request id is subject to the rule: from a
// bridge and not empty.
func dedupes(c *conn, id string) bool { return c.role == wire.RoleBridge && id != "" }

// repeatedLocked answers a bridge's request that the thread accepted
// before with TypeAccepted and reports true; else it reports false. The
// caller holds t.mu.
func (t *thread) repeatedLocked(c *conn, id string) bool {
	if !dedupes(c, id) || !t.accepted.has(id) {
		return false
	}
	t.log.Info("request already accepted; not run again", "id", id)
	c.reply(wire.MustNew(wire.TypeAccepted, t.name, id, nil))
	return true
}

// acceptLocked remembers a bridge's request id once its work started. The
// caller holds t.mu.
func (t *thread) acceptLocked(c *conn, id string) {
	if dedupes(c, id) {
		t.accepted.add(id)
	}
}
