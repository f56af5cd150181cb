package tools

import "time"

// SparePID waits up to d for the job manager's spare shell and returns its
// pid, or 0 when none became ready. For tests of the spare shell.
func SparePID(s *Set, d time.Duration) int {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.jobs.mu.Lock()
		sp := s.jobs.spare
		s.jobs.mu.Unlock()
		if sp != nil {
			return sp.proc.Pid()
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0
}
