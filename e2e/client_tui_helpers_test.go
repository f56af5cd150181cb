package e2e_test

import (
	"os"
	"strings"
)

// colorEnv is clientEnv with colors on (a real terminal's TERM) and the
// config folder (where the history lives) at dir.
func (e *env) colorEnv(dir string) []string {
	var out []string
	for _, kv := range e.clientEnv() {
		if !strings.HasPrefix(kv, "NO_COLOR=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") && !strings.HasPrefix(kv, "TERM=") {
			out = append(out, kv)
		}
	}
	return append(out, "XDG_CONFIG_HOME="+dir, "TERM=xterm-256color")
}

// sameFile reports whether two local files have the same bytes.
func sameFile(a, b string) bool {
	x, err1 := os.ReadFile(a)
	y, err2 := os.ReadFile(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
