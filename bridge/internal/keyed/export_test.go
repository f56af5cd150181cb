package keyed

// Held reports how many keys have an entry.
func (m *Mutex) Held() int { return m.held() }
