package posture

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Read returns the running process's posture, from the real filesystem.
func Read() wire.Posture {
	return FromFS(os.DirFS("/"), os.Getuid(), os.Getgid())
}

// FromFS reads a posture from fsys, a view of "/" (proc/self/status,
// proc/self/mountinfo and sys/fs/cgroup, v1 or v2), for the given ids.
func FromFS(fsys fs.FS, uid, gid int) wire.Posture {
	p := wire.Posture{UID: uid, GID: gid}
	fail := func(err error) { p.Errors = append(p.Errors, err.Error()) }
	if err := readStatus(fsys, &p); err != nil {
		fail(err)
	}
	if ro, err := readOnlyRoot(fsys); err != nil {
		fail(err)
	} else {
		p.ReadOnlyRoot = ro
	}
	var err error
	if p.PidsMax, err = firstLimit(fsys, "sys/fs/cgroup/pids/pids.max", "sys/fs/cgroup/pids.max"); err != nil {
		fail(err)
	}
	if p.MemoryMaxBytes, err = firstLimit(fsys, "sys/fs/cgroup/memory/memory.limit_in_bytes", "sys/fs/cgroup/memory.max"); err != nil {
		fail(err)
	}
	p.CPUQuota = cpuQuota(fsys)
	return p
}

// readStatus fills capabilities, no_new_privs and seccomp from
// proc/self/status.
func readStatus(fsys fs.FS, p *wire.Posture) error {
	data, err := fs.ReadFile(fsys, "proc/self/status")
	if err != nil {
		return fmt.Errorf("read status: %w", err)
	}
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case "CapEff":
			p.CapEff, found = val, found+1
		case "CapBnd":
			p.CapBnd, found = val, found+1
		case "NoNewPrivs":
			p.NoNewPrivs, found = val == "1", found+1
		case "Seccomp":
			p.Seccomp, _ = strconv.Atoi(val)
			found++
		}
	}
	if found < 4 {
		return fmt.Errorf("status lacks CapEff, CapBnd, NoNewPrivs or Seccomp")
	}
	return nil
}

// readOnlyRoot reports whether the mount at / is read-only, from the last
// mountinfo line for / (later mounts hide earlier ones).
func readOnlyRoot(fsys fs.FS) (bool, error) {
	data, err := fs.ReadFile(fsys, "proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("read mountinfo: %w", err)
	}
	ro, seen := false, false
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 6 || f[4] != "/" {
			continue
		}
		seen = true
		ro = false
		for opt := range strings.SplitSeq(f[5], ",") {
			ro = ro || opt == "ro"
		}
	}
	if !seen {
		return false, fmt.Errorf("mountinfo has no root mount")
	}
	return ro, nil
}

// firstLimit reads the first of paths that exists: a number, or "max"
// (unlimited, 0). cgroup v1's "no limit" memory value is also 0.
func firstLimit(fsys fs.FS, paths ...string) (int64, error) {
	for _, p := range paths {
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(data))
		if s == "max" {
			return 0, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read %s: %q is not a number", p, s)
		}
		if n >= 1<<62 { // v1 reports "unlimited" as a huge page-aligned number
			return 0, nil
		}
		return n, nil
	}
	return 0, fmt.Errorf("no cgroup file among %s", strings.Join(paths, ", "))
}

// cpuQuota is the CPU limit in CPUs, 0 when none or unknown.
func cpuQuota(fsys fs.FS) float64 {
	if data, err := fs.ReadFile(fsys, "sys/fs/cgroup/cpu.max"); err == nil { // v2: "quota period"
		q, per, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
		return ratio(q, per)
	}
	q, err1 := fs.ReadFile(fsys, "sys/fs/cgroup/cpu/cpu.cfs_quota_us")
	per, err2 := fs.ReadFile(fsys, "sys/fs/cgroup/cpu/cpu.cfs_period_us")
	if err1 != nil || err2 != nil {
		return 0
	}
	return ratio(strings.TrimSpace(string(q)), strings.TrimSpace(string(per)))
}

func ratio(quota, period string) float64 {
	q, err1 := strconv.ParseFloat(quota, 64)
	p, err2 := strconv.ParseFloat(period, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0
	}
	return q / p
}
