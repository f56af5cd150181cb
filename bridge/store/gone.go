package store

import "errors"

// ErrDeleted is the error an append of a deleted thread's event gets: the
// thread was deleted (DeleteThread or retention) before it was queued, so
// it is dropped rather than bringing back a bucket nobody removes.
var ErrDeleted = errors.New("thread deleted")

// goneKeep is how many of the newest deleted thread ids the writer
// remembers. Late writes come from the deleted thread's last goroutines,
// moments after the deletion; thread ids are random and never reused.
const goneKeep = 4096

// goneSet remembers recently deleted threads, oldest first. The writer's
// mutex guards it.
type goneSet struct {
	ids   map[string]struct{}
	order []string
}

// addLocked marks id deleted, forgetting the oldest beyond goneKeep.
func (g *goneSet) addLocked(id string) {
	if g.ids == nil {
		g.ids = make(map[string]struct{})
	}
	if _, ok := g.ids[id]; ok {
		return
	}
	g.ids[id] = struct{}{}
	g.order = append(g.order, id)
	if len(g.order) > goneKeep {
		delete(g.ids, g.order[0])
		g.order = g.order[1:]
	}
}

// hasLocked reports whether id was deleted recently.
func (g *goneSet) hasLocked(id string) bool {
	_, ok := g.ids[id]
	return ok
}

// markGone makes the writer drop everything queued for ids from now on.
func (w *writer) markGone(ids ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		w.gone.addLocked(id)
	}
}
