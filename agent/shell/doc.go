// Package shell runs processes on pseudo-terminals.
//
// Start launches a command in its own session and process group with a PTY
// as its controlling terminal. One goroutine owned by the Process copies the
// PTY output to the Spec's Output writer; another waits for the process.
// Wait blocks until the process has exited and its output has been drained;
// Close tears the whole process group down in stages (SIGHUP and SIGTERM,
// a grace period, SIGKILL) and releases the PTY. No goroutine started by this
// package outlives Close.
//
// Two stdin modes exist: StdinPTY for interactive programs (terminals the
// user types into) and StdinNull for commands run on the model's behalf,
// where stdin is /dev/null so nothing can wait for input, while stdout and
// stderr still go to the PTY so programs see a terminal and line-buffer.
package shell
