// Package mcptest helps the tests of boxwire's MCP clients
// (agent/mcptools, bridge/hosttools): it builds the test MCP server,
// e2e/cmd/mcptool, once per test binary.
package mcptest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// Main is a TestMain: it builds mcptool into a temporary folder, sets
// *path to the binary, runs m with goroutine-leak checks
// (goleak.VerifyTestMain), removes the folder and exits with m's code.
// A failed build exits 1.
func Main(m *testing.M, path *string) {
	dir, err := os.MkdirTemp("", "mcptool")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*path = filepath.Join(dir, "mcptool")
	build := exec.Command("go", "build", "-o", *path, "github.com/boxwire/boxwire/e2e/cmd/mcptool")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build mcptool:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}
