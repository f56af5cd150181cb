package execute

import "time"

// SparePID waits up to d until the job manager's spare shells are ready
// and returns the pid of the one the next command takes (the newest), or 0
// when none became ready. For tests of the spare shells.
func SparePID(r *Runner, d time.Duration) int {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		r.jobs.mu.Lock()
		var pid int
		if n := len(r.jobs.spares); n > 0 && !r.jobs.refilling {
			pid = r.jobs.spares[n-1].proc.Pid()
		}
		r.jobs.mu.Unlock()
		if pid != 0 {
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0
}

// Capture writes each of chunks to a capture of limit bytes and returns its
// text (naming full as the full output's file), whether it was cut, and its
// line count. For tests of the capture.
func Capture(limit int, full string, chunks ...string) (string, bool, int64) {
	c := newCapture(limit)
	for _, ch := range chunks {
		_, _ = c.Write([]byte(ch))
	}
	text, cut := c.text(full)
	return text, cut, c.totalLines()
}

// CgroupPaths returns the cgroup v2 path and v1 memory controller path a
// /proc/PID/cgroup file at path names. For tests of the cgroup lookup.
func CgroupPaths(path string) (v2, v1 string) { return cgroupPaths(path) }
