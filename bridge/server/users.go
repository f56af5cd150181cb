package server

import (
	"context"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/users"
)

// Identity, ownership, quotas and the audit log are bridge/users'
// (docs/users.md): the server's users (Server.users) guards the routes,
// checks quotas and records what each user does, and asks threadDirectory
// about the server's threads.

// threadDirectory is the server's threads as bridge/users sees them
// (users.Threads).
type threadDirectory struct{ s *Server }

// Owner returns the owner of thread id and whether the thread exists
// (live, or kept in the store); a live thread without a record is the
// admin's.
func (d threadDirectory) Owner(ctx context.Context, id string) (owner string, exists bool) {
	rec, ok, err := d.s.cfg.Store.Get(ctx, id)
	if err == nil && ok {
		return users.OwnerName(rec.Owner), true
	}
	if d.s.lookup(id) != nil {
		return auth.AdminUser, true
	}
	return "", false
}

// Live returns the ids of the live threads.
func (d threadDirectory) Live() []string {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.threads))
	for id := range s.threads {
		ids = append(ids, id)
	}
	return ids
}

// OfBox returns the id of a live thread of sandbox box, "" when none.
func (d threadDirectory) OfBox(box string) string {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, t := range s.threads {
		if t.box != nil && t.box.ID() == box {
			return id
		}
	}
	return ""
}
