package lease

import "time"

// A bridge cut off from the store cannot renew its threads' leases; the
// server asks Overdue which have run out, and Peers whom to ask whether
// the store is down for them too (bridge/failover, Failover.CutOff).

// Overdue returns the threads of live whose lease has run out by this
// bridge's clock: the store answered no take or renewal of it that began
// within the last ttl (the store's expiry is later than that beginning
// plus the ttl, so another bridge cannot have it earlier).
func (l *Book) Overdue(live []string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var over []string
	for _, id := range live {
		if at, ok := l.renewed[id]; ok && time.Since(at) > l.ttl {
			over = append(over, id)
		}
	}
	return over
}

// Peers returns the announced addresses of the other bridges, as the
// store listed them at the last renewal it answered.
func (l *Book) Peers() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, b := range l.peers {
		if b.ID != l.id && b.Address != "" {
			out = append(out, b.Address)
		}
	}
	return out
}
