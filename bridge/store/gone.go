package store

import "errors"

// ErrDeleted is the error an append of a deleted thread's event gets: the
// thread was deleted (DeleteThread or retention) before it was queued, so
// it is dropped rather than bringing back a bucket nobody removes.
var ErrDeleted = errors.New("thread deleted")

// goneKeep is how many of the newest deleted thread ids a Writer
// remembers, to refuse their writes before they are queued. Late writes
// come from the deleted thread's last goroutines, moments after the
// deletion; thread ids are random and never reused. That is all the bbolt
// store needs (one process writes the file); the PostgreSQL store also
// keeps tombstones in the database, for the writes of other bridges
// (pgstore's thread_logs.deleted), and tells the Writer of those it meets
// (Commit's deleted threads).
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
