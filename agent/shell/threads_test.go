package shell_test

import (
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/shell"
	"github.com/boxwire/boxwire/agent/threads"
)

// Running processes do not hold OS threads: they are awaited in the poller
// (a sandbox's pids limit counts threads, and the agent has a fixed
// reserve). 40 running commands add far fewer than 40 threads, and each
// still reports its exit.
func TestRunningProcessesHoldNoThreads(t *testing.T) {
	const n = 40
	before, err := threads.Count()
	if err != nil {
		t.Fatal(err)
	}
	procs := make([]*shell.Process, n)
	for i := range procs {
		procs[i], _ = start(t, shell.Spec{Command: []string{"sh", "-c", "read x; exit 7"}})
	}
	time.Sleep(200 * time.Millisecond) // let every waiter reach its wait
	during, err := threads.Count()
	if err != nil {
		t.Fatal(err)
	}
	if during-before >= n/2 {
		t.Errorf("%d running processes took %d more threads (%d before)", n, during-before, before)
	}
	for _, p := range procs {
		if _, err := p.Write([]byte("go\n")); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range procs {
		if code, err := wait(t, p); code != 7 || err != nil {
			t.Fatalf("exit %d, %v; want 7, nil", code, err)
		}
	}
}
