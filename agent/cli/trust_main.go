package cli

import (
	"os"
	"path/filepath"

	"github.com/boxwire/boxwire/agent/trust"
)

// trustEnv adds to env the variables that make the usual tools trust the
// bridge's egress CA at caPath (none when caPath is empty).
func trustEnv(env []string, caPath string) ([]string, error) {
	more, err := trust.Env(caPath, trust.SystemBundle, filepath.Join(os.TempDir(), "boxwire-trust"))
	return append(env, more...), err
}
