package tools

import "time"

// SparePID waits up to d until the job manager's spare shells are ready
// and returns the pid of the one the next command takes (the newest), or 0
// when none became ready. For tests of the spare shells.
func SparePID(s *Set, d time.Duration) int {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.jobs.mu.Lock()
		var pid int
		if n := len(s.jobs.spares); n > 0 && !s.jobs.refilling {
			pid = s.jobs.spares[n-1].proc.Pid()
		}
		s.jobs.mu.Unlock()
		if pid != 0 {
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0
}
