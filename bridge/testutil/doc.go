// Package testutil holds the bounded waits the tests of every package here
// share (agent, bridge, client, e2e): each wait has a deadline and fails
// the test instead of hanging, in the manner of coder/coder's testutil.
//
// Every function that fails the test calls t.Fatalf, so it must run on the
// test's own goroutine. The timeout is the caller's: a package keeps its
// own limit (a unit test's few seconds, an engine test's minute), and the
// failure message says what was waited for and for how long. Buffer is
// the writer a test reads while others write to it (logs, output).
//
// The package imports nothing of ours; it is meant for _test files only.
package testutil
