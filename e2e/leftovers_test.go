package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"

	"github.com/boxwire/boxwire/bridge/sandbox"
)

// The suite's last check: after every test, nothing any of its bridges
// made may be left on the engine or the host — no container, no workspace
// volume (labelled with one of this run's bridge ids, or an unlabelled
// boxwire-ws-* volume that was not there before the run: the engine makes
// one without labels when a mount names a volume that is gone), no loop
// device backed by a file in one of this run's data folders, no mount (an
// agent folder's tmpfs) under one of them. A leak fails the run, and the
// leftovers are then removed.

// runs records this run's bridge ids and data folders.
var runs struct {
	mu      sync.Mutex
	owners  map[string]bool
	dataDir []string
}

// recordRun notes a bridge id and its data folder for the final check.
func recordRun(owner, dataDir string) {
	runs.mu.Lock()
	defer runs.mu.Unlock()
	if runs.owners == nil {
		runs.owners = map[string]bool{}
	}
	runs.owners[owner] = true
	runs.dataDir = append(runs.dataDir, dataDir)
}

// engineObjects lists "kind name owner" for every container with a
// boxwire.owner label and every boxwire-ws-* volume, through the docker
// CLI.
func engineObjects() ([]string, error) {
	var all []string
	for _, q := range [][]string{
		{"container", "ls", "--all", "--filter", "label=boxwire.owner", "--format", `container {{.Names}} {{.Label "boxwire.owner"}}`},
		{"volume", "ls", "--filter", "name=boxwire-ws-", "--format", `volume {{.Name}} {{.Label "boxwire.owner"}}`},
	} {
		out, err := exec.Command("docker", q...).Output()
		if err != nil {
			return nil, fmt.Errorf("docker %s: %w", strings.Join(q[:2], " "), err)
		}
		for line := range strings.Lines(string(out)) {
			if line = strings.TrimSpace(line); line != "" {
				all = append(all, line)
			}
		}
	}
	return all, nil
}

// leftovers returns what this run left: engine objects owned by one of its
// bridges, unlabelled workspace volumes not in before, and loop devices
// under its data folders.
func leftovers(before []string) ([]string, error) {
	now, err := engineObjects()
	if err != nil {
		return nil, err
	}
	runs.mu.Lock()
	defer runs.mu.Unlock()
	var left []string
	for _, obj := range now {
		f := strings.Fields(obj)
		owned := len(f) == 3 && runs.owners[f[2]]
		unlabelled := len(f) == 2 && f[0] == "volume" && !slices.Contains(before, obj)
		if owned || unlabelled {
			left = append(left, obj)
		}
	}
	for _, dir := range runs.dataDir {
		devs, err := sandbox.LoopDevicesUnder(dir)
		if err != nil {
			return nil, err
		}
		for _, d := range devs {
			left = append(left, "loop "+d+" "+dir)
		}
		for _, m := range mountsUnder(dir) {
			left = append(left, "mount "+m)
		}
	}
	return left, nil
}

// mountsUnder lists the mount points below dir (/proc/self/mountinfo's
// fifth field; paths with spaces are escaped there and never ours).
func mountsUnder(dir string) []string {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for line := range strings.Lines(string(raw)) {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// removeLeftover deletes one entry of leftovers.
func removeLeftover(obj string) {
	f := strings.Fields(obj)
	switch f[0] {
	case "container":
		_ = exec.Command("docker", "rm", "--force", "--volumes", f[1]).Run()
	case "volume":
		_ = exec.Command("docker", "volume", "rm", "--force", f[1]).Run()
	case "loop":
		_ = exec.Command("losetup", "--detach", f[1]).Run()
	case "mount":
		_ = exec.Command("umount", "--lazy", f[1]).Run()
	}
}
