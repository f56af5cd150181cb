package keyed

// Held reports how many keys have an entry.
func (m *Mutex) Held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.locks)
}
