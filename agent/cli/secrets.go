package cli

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// hideFromCommands makes the agent's process not dumpable. Commands run as
// the agent's user, and a dumpable process's /proc/<pid>/mem, environ and
// maps are open to its own user: a command could read the agent's secrets
// or patch its code, around the seccomp denial of ptrace. A process that is
// not dumpable has its /proc files owned by root, so only the kernel (and
// root, which no sandbox has) reaches them. Commands the agent starts are
// dumpable again after their execve; that is theirs to decide.
func hideFromCommands() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the agent not dumpable: %w", err)
	}
	return nil
}

// secret returns the variable name, or when name_FILE is set, the first
// line of that file. A file (a Docker secret, a bind-mounted key) keeps a
// standalone agent's secret out of the container's environment, which the
// init process (PID 1) also holds and commands can read in /proc/1/environ.
func secret(getenv func(string) string, name string) (string, error) {
	path := getenv(name + "_FILE")
	if path == "" {
		return getenv(name), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s_FILE: %w", name, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line), nil
}
