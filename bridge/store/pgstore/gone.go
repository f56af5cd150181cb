package pgstore

// goneKeep is how many of the newest deleted thread ids the writer
// remembers, to refuse their writes at once; the database's tombstones
// (thread_logs.deleted) catch the rest, and those of other bridges.
const goneKeep = 4096

// goneSet remembers recently deleted threads, oldest first. The writer's
// mutex guards it.
type goneSet struct {
	ids   map[string]struct{}
	order []string
}

func (g *goneSet) add(id string) {
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

func (g *goneSet) has(id string) bool {
	_, ok := g.ids[id]
	return ok
}
