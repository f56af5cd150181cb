package e2e_test

import (
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// awaitAny returns the next event, failing the test after wait.
func (s *session) awaitAny(wait time.Duration) wire.Envelope {
	s.t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case ev, ok := <-s.conn.Events():
		if !ok {
			s.t.Fatalf("connection ended: %v", s.conn.Err())
		}
		return ev
	case <-timer.C:
		s.t.Fatalf("no event within %v", wait)
	}
	return wire.Envelope{}
}
