package e2e_test

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cpuSnapshot is the CPU time (user + system, in clock ticks) of every
// process on the host by command name, and the machine's total busy and
// idle ticks: two of them a while apart say what took the CPU meanwhile.
type cpuSnapshot struct {
	byComm     map[string]uint64
	busy, idle uint64
}

// takeCPU reads /proc/stat and every /proc/PID/stat it can.
func takeCPU() cpuSnapshot {
	s := cpuSnapshot{byComm: map[string]uint64{}}
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(data), "\n")
		for i, f := range strings.Fields(line)[1:] {
			n, _ := strconv.ParseUint(f, 10, 64)
			if i == 3 || i == 4 { // idle, iowait
				s.idle += n
			} else {
				s.busy += n
			}
		}
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // ended meanwhile
		}
		open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(string(data[end+1:])) // from the state on: utime, stime are fields 12 and 13
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseUint(f[11], 10, 64)
		st, _ := strconv.ParseUint(f[12], 10, 64)
		s.byComm[string(data[open+1:end])] += ut + st
	}
	return s
}

// cpuNote says how busy the machine was from a to b and which commands
// took most of it ("busy 62% of 2 CPUs; bash 31%, boxwire-agent 12%, …",
// in per cent of one CPU). A command whose processes ended meanwhile
// shows less than it took.
func cpuNote(a, b cpuSnapshot, took time.Duration, top int) string {
	type use struct {
		comm  string
		ticks uint64
	}
	var uses []use
	for comm, t := range b.byComm {
		if d := t - min(t, a.byComm[comm]); d > 0 {
			uses = append(uses, use{comm, d})
		}
	}
	slices.SortFunc(uses, func(x, y use) int { return cmp.Compare(y.ticks, x.ticks) })
	busy, idle := b.busy-a.busy, b.idle-a.idle
	note := fmt.Sprintf("busy %.0f%% of the machine", 100*float64(busy)/float64(max(busy+idle, 1)))
	ticks := 100 * took.Seconds() // USER_HZ
	for i, u := range uses[:min(top, len(uses))] {
		sep := ", "
		if i == 0 {
			sep = "; "
		}
		note += fmt.Sprintf("%s%s %.0f%%", sep, u.comm, 100*float64(u.ticks)/ticks)
	}
	return note + " (of one CPU)"
}
