package testutil

import (
	"os"
	"testing"
)

// EngineTests is the environment variable that opts in to the tests that
// need a Docker engine: they run when it is "1" (make unit and .ci/stress
// set it) and skip otherwise, so that plain `go test ./...` passes on a
// machine without one.
const EngineTests = "BOXWIRE_ENGINE_TESTS"

// NeedEngine skips the test unless EngineTests is "1". A test that has
// opted in and then finds no engine fails: make unit must not pass by
// skipping.
func NeedEngine(t testing.TB) {
	t.Helper()
	if os.Getenv(EngineTests) != "1" {
		t.Skipf("needs a Docker engine: set %s=1 to run it (make unit does)", EngineTests)
	}
}
