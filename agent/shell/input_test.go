package shell_test

import (
	"os/exec"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/shell"
	"github.com/boxwire/boxwire/bridge/testutil"
)

// AwaitingInput sees a prompt however the program waits for the terminal
// (read, select, poll, epoll), and not a program that sleeps or waits on
// something else. Each program prints "ready" just before it waits.
func TestAwaitingInputHoweverTheProgramWaits(t *testing.T) {
	const py = "import os, select, sys, time; "
	tests := []struct {
		name    string
		needs   string
		command []string
		stdin   shell.StdinMode
		waits   bool
	}{
		{"read on stdin", "bash", bash(`echo ready; read x`), shell.StdinPTY, true},
		{"read -t on stdin", "bash", bash(`echo ready; read -t 60 x`), shell.StdinPTY, true},
		{"read from /dev/tty", "bash", bash(`echo ready; read x </dev/tty`), shell.StdinNull, true},
		{"select on stdin", "python3", []string{"python3", "-c", py + "print('ready', flush=True); select.select([sys.stdin], [], [])"}, shell.StdinPTY, true},
		{"select on /dev/tty", "python3", []string{"python3", "-c", py + "f = open('/dev/tty'); print('ready', flush=True); select.select([f], [], [], 60)"}, shell.StdinNull, true},
		{"poll on /dev/tty", "python3", []string{"python3", "-c", py + "f = open('/dev/tty'); p = select.poll(); p.register(f, select.POLLIN); print('ready', flush=True); p.poll(60000)"}, shell.StdinNull, true},
		{"epoll on stdin", "python3", []string{"python3", "-c", py + "e = select.epoll(); e.register(0, select.EPOLLIN); print('ready', flush=True); e.poll(60)"}, shell.StdinPTY, true},
		{"node stdin", "node", []string{"node", "-e", `console.log("ready"); process.stdin.on("data", () => {})`}, shell.StdinPTY, true},
		{"sleep", "bash", bash(`echo ready; exec sleep 60`), shell.StdinPTY, false},
		{"python sleep", "python3", []string{"python3", "-c", py + "print('ready', flush=True); time.sleep(60)"}, shell.StdinPTY, false},
		{"select with a timeout only", "python3", []string{"python3", "-c", py + "print('ready', flush=True); select.select([], [], [], 60)"}, shell.StdinPTY, false},
		{"select on a pipe", "python3", []string{"python3", "-c", py + "r, w = os.pipe(); print('ready', flush=True); select.select([r], [], [], 60)"}, shell.StdinPTY, false},
		{"poll on a pipe", "python3", []string{"python3", "-c", py + "r, w = os.pipe(); p = select.poll(); p.register(r, select.POLLIN); print('ready', flush=True); p.poll(60000)"}, shell.StdinPTY, false},
		{"epoll on a pipe", "python3", []string{"python3", "-c", py + "r, w = os.pipe(); e = select.epoll(); e.register(r, select.EPOLLIN); print('ready', flush=True); e.poll(60)"}, shell.StdinPTY, false},
		{"node timer", "node", []string{"node", "-e", `console.log("ready"); setTimeout(() => {}, 60000)`}, shell.StdinPTY, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := exec.LookPath(tt.needs); err != nil {
				t.Skipf("no %s: %v", tt.needs, err)
			}
			p, out := start(t, shell.Spec{Command: tt.command, Stdin: tt.stdin})
			out.waitFor(t, "ready")
			if tt.waits {
				testutil.Eventually(t, "AwaitingInput", waitLimit, p.AwaitingInput)
				return
			}
			// The program is in its wait well within this time (the ones
			// above are); it must never look like a prompt.
			for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				if p.AwaitingInput() {
					t.Fatalf("awaiting input, but the program does not read the terminal")
				}
			}
		})
	}
}
