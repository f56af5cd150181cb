package execute

import (
	"os"
	"strings"
)

// inheritedEnv names the variables of the agent's own environment that
// commands inherit. Everything else — the model endpoint's key, the
// agent's token and configuration — stays with the agent. Besides the
// basics, where packages go: the image sets HOME on the workspace
// (/workspace/.home, pip's user site below it) and NPM_CONFIG_PREFIX there;
// PYTHONUSERBASE and VIRTUAL_ENV are for derived images that move them.
var inheritedEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "USER", "LOGNAME", "SHELL", "TZ", "TMPDIR",
	"NPM_CONFIG_PREFIX", "PYTHONUSERBASE", "VIRTUAL_ENV"}

// execEnv is laid over the inherited variables for every command so that
// nothing waits for a human: pagers print straight through, git and package
// managers never prompt, editors exit at once, and tools that check CI pick
// their non-interactive mode. TERM matches the PTY the command runs on.
var execEnv = []string{
	"TERM=xterm-256color",
	"PAGER=cat",
	"GIT_PAGER=cat",
	"MANPAGER=cat",
	"SYSTEMD_PAGER=cat",
	"GIT_TERMINAL_PROMPT=0",
	"GIT_EDITOR=true",
	"EDITOR=true",
	"VISUAL=true",
	"DEBIAN_FRONTEND=noninteractive",
	"PIP_NO_INPUT=1",
	"PIP_DISABLE_PIP_VERSION_CHECK=1", // no call to the index for its version
	"NO_COLOR=1",
	"CI=1",
}

// defaultPath is PATH for commands when the agent has none.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// childEnv builds a command's environment from scratch: the allowlisted
// variables of the agent's environment, the non-interactive defaults, then
// extra (Config.Env), each later entry replacing an earlier one of the
// same name.
func childEnv(extra []string) []string {
	env := []string{defaultPath}
	for _, name := range inheritedEnv {
		if v, ok := os.LookupEnv(name); ok {
			env = mergeEnv(env, []string{name + "=" + v})
		}
	}
	env = mergeEnv(env, execEnv)
	return mergeEnv(env, extra)
}

// mergeEnv returns base with the variables of over set, replacing any of
// the same name.
func mergeEnv(base, over []string) []string {
	names := make(map[string]bool, len(over))
	for _, kv := range over {
		name, _, _ := strings.Cut(kv, "=")
		names[name] = true
	}
	env := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		if name, _, _ := strings.Cut(kv, "="); !names[name] {
			env = append(env, kv)
		}
	}
	return append(env, over...)
}

// envValue is the value of name in env ("" when unset).
func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v
		}
	}
	return ""
}
