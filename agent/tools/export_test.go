package tools

import (
	"context"
	"time"
)

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

// Gate returns s's tool called name with its calls passed through a new
// gate of n places in front of run instead of the tool's own Run (to
// observe how many calls run at once). For tests of the gate.
func Gate(s *Set, name string, n int, run func(Call) Result) Tool {
	t, _ := s.Lookup(name)
	return gated{runFunc{Tool: t, run: run}, make(gate, n)}
}

type runFunc struct {
	Tool
	run func(Call) Result
}

func (r runFunc) Run(_ context.Context, c Call) Result { return r.run(c) }

// GatedNames lists the names of s's gated tools.
func GatedNames(s *Set) []string {
	var names []string
	for _, t := range s.All() {
		if _, ok := t.(gated); ok {
			names = append(names, t.Name())
		}
	}
	return names
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
