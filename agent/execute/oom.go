package execute

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Where the agent finds the sandbox's memory cgroup (DefaultMemoryCgroup
// and findMemoryCgroup).
const (
	cgroupRoot = "/sys/fs/cgroup"
	procCgroup = "/proc/self/cgroup"
)

// DefaultMemoryCgroup, as Config.MemoryCgroup, means: find the agent's own
// memory cgroup — the sandbox's — from /proc/self/cgroup under
// /sys/fs/cgroup (cgroup v2, or v1's memory controller).
const DefaultMemoryCgroup = ""

// NoMemoryCgroup, as Config.MemoryCgroup, turns the out-of-memory check
// off: a command killed by SIGKILL is reported as exited with code 137.
const NoMemoryCgroup = "-"

// memCgroup reads a memory cgroup's files: how many processes the kernel's
// OOM killer killed in it (or below it) and its limit. The zero value
// reads nothing. Reads are a small file each, done once when a command
// starts and once when it ends by SIGKILL.
type memCgroup struct {
	events string // a file with an "oom_kill N" line: v2 memory.events, v1 memory.oom_control
	limit  string // v2 memory.max ("max" or bytes), v1 memory.limit_in_bytes
}

// findMemoryCgroup returns the memory cgroup named by dir (a cgroup's
// directory, v2 or v1's memory controller), or, for DefaultMemoryCgroup,
// the agent's own. In a container the cgroup file system shows the
// container's own cgroup at its root — a private cgroup namespace (Docker
// on cgroup v2, a Kubernetes pod's container) or, without one, runc's bind
// mount of the container's directory (Docker on cgroup v1) — so the root
// is taken when the path /proc/self/cgroup names is not there.
func findMemoryCgroup(dir string) memCgroup {
	switch dir {
	case NoMemoryCgroup:
		return memCgroup{}
	case DefaultMemoryCgroup:
	default:
		return cgroupIn(dir)
	}
	v2, v1 := cgroupPaths(procCgroup)
	for _, d := range []string{
		filepath.Join(cgroupRoot, v2), cgroupRoot,
		filepath.Join(cgroupRoot, "memory", v1), filepath.Join(cgroupRoot, "memory"),
	} {
		if cg := cgroupIn(d); cg.events != "" {
			return cg
		}
	}
	return memCgroup{}
}

// cgroupIn returns the memory cgroup files in dir, v2's first; none when
// dir has neither.
func cgroupIn(dir string) memCgroup {
	if fileExists(filepath.Join(dir, "memory.events")) {
		return memCgroup{events: filepath.Join(dir, "memory.events"), limit: filepath.Join(dir, "memory.max")}
	}
	if fileExists(filepath.Join(dir, "memory.oom_control")) {
		return memCgroup{events: filepath.Join(dir, "memory.oom_control"), limit: filepath.Join(dir, "memory.limit_in_bytes")}
	}
	return memCgroup{}
}

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// cgroupPaths returns the cgroup v2 path ("0::PATH") and the v1 memory
// controller's ("N:...memory...:PATH") that the file at path (a
// /proc/PID/cgroup) names; "/" for those it lacks.
func cgroupPaths(path string) (v2, v1 string) {
	v2, v1 = "/", "/"
	data, err := os.ReadFile(path)
	if err != nil {
		return v2, v1
	}
	for line := range strings.Lines(string(data)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			v2 = f[2]
		case containsWord(f[1], "memory"):
			v1 = f[2]
		}
	}
	return v2, v1
}

func containsWord(list, word string) bool {
	for w := range strings.SplitSeq(list, ",") {
		if w == word {
			return true
		}
	}
	return false
}

// oomKills returns the cgroup's count of processes killed by the OOM
// killer; ok is false when it cannot be read.
func (c memCgroup) oomKills() (n int64, ok bool) {
	if c.events == "" {
		return 0, false
	}
	data, err := os.ReadFile(c.events)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if key == "oom_kill" {
			n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// limitBytes returns the cgroup's memory limit; ok is false when it has
// none ("max", v1's huge "unlimited") or it cannot be read.
func (c memCgroup) limitBytes() (n int64, ok bool) {
	if c.limit == "" {
		return 0, false
	}
	data, err := os.ReadFile(c.limit)
	if err != nil {
		return 0, false
	}
	n, err = strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || n <= 0 || n >= 1<<62 {
		return 0, false
	}
	return n, true
}

// oomMessage is the error of a command the OOM killer ended, naming the
// cgroup's limit when it has one.
func (c memCgroup) oomMessage() string {
	const msg = "killed for running out of memory"
	n, ok := c.limitBytes()
	if !ok {
		return msg + ": the kernel's OOM killer ended it (the sandbox has no memory limit of its own; the machine ran short)"
	}
	return fmt.Sprintf("%s: the sandbox's limit is %s; the kernel's OOM killer ended it", msg, mib(n))
}

// mib writes n bytes in MiB: whole when exact, else to a tenth.
func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
