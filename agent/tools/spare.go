package tools

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/boxwire/boxwire/agent/shell"
)

// spareWrapper is what a spare shell runs. Prepared as every command's
// shell is (the OOM killer picks it first, no core dumps), it starts as a
// login shell and reads its profile, then waits for the command on fd 3 and
// evaluates it: the same as bash -lc "$command", with the start-up paid
// before the command arrives.
const spareWrapper = `echo 1000 > /proc/self/oom_score_adj 2>/dev/null; ulimit -c 0 2>/dev/null; ` +
	`exec bash -l -c 'IFS= read -r -d "" __boxwire_cmd <&3; exec 3<&-; eval "unset __boxwire_cmd; $__boxwire_cmd"'`

// maxSpareEarlyOutput bounds what a spare may print (from its profile)
// before a command claims it; the claiming job gets it first.
const maxSpareEarlyOutput = 64 << 10

// spare is a shell started ahead of time, waiting for a command on a pipe.
// The job manager keeps at most one, started after each foreground command
// ends, so the next command skips process and login-shell start-up (most of
// the latency of a small command). It runs a single command, then it is a
// job like any other.
type spare struct {
	proc *shell.Process
	dir  string
	cmdW *os.File // write end of the spare's fd 3
	out  *lateWriter
}

// startSpare launches a spare shell in dir.
func (m *jobManager) startSpare(dir string) (*spare, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("spare shell: %w", err)
	}
	defer r.Close() // the child has its own copy
	out := &lateWriter{}
	proc, err := shell.Start(context.Background(), shell.Spec{
		Command:    []string{"bash", "-c", spareWrapper},
		Dir:        dir,
		Env:        m.env,
		Cols:       m.cols,
		Rows:       m.rows,
		Stdin:      shell.StdinNull,
		Output:     out,
		KillGrace:  m.grace,
		ExtraFiles: []*os.File{r},
	})
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("spare shell: %w", err)
	}
	return &spare{proc: proc, dir: dir, cmdW: w, out: out}, nil
}

// claim hands command to the spare and binds its output to j. It fails
// (and the caller starts the command the ordinary way) when the spare died
// while waiting.
func (s *spare) claim(command string, j *job) (*shell.Process, error) {
	_, err := io.WriteString(s.cmdW, command)
	if cerr := s.cmdW.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.discard()
		return nil, fmt.Errorf("spare shell gone: %w", err)
	}
	s.out.bind(j)
	return s.proc, nil
}

// discard kills an unclaimed spare and waits for it.
func (s *spare) discard() {
	_ = s.cmdW.Close()
	_ = s.proc.Close()
	_, _ = s.proc.Wait()
}

// takeSpare returns the spare for dir, if one is ready, and forgets it.
// Called with m.mu held.
func (m *jobManager) takeSpare(dir string) *spare {
	s := m.spare
	if s == nil || s.dir != dir {
		return nil
	}
	m.spare = nil
	return s
}

// refill starts a new spare for dir in the background unless one exists.
// The goroutine belongs to the manager's WaitGroup.
func (m *jobManager) refill(dir string) {
	m.mu.Lock()
	if m.closed || m.spare != nil || m.refilling {
		m.mu.Unlock()
		return
	}
	m.refilling = true
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		s, err := m.startSpare(dir)
		m.mu.Lock()
		m.refilling = false
		keep := err == nil && !m.closed
		if keep {
			m.spare = s
		}
		m.mu.Unlock()
		if err == nil && !keep {
			s.discard()
		}
	}()
}

// lateWriter holds a spare's output until a job claims it, then passes
// everything on to the job.
type lateWriter struct {
	mu    sync.Mutex
	w     io.Writer
	early bytes.Buffer
}

func (l *lateWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		return l.w.Write(p)
	}
	if room := maxSpareEarlyOutput - l.early.Len(); room > 0 {
		l.early.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// bind sends the held output to w, then everything after it.
func (l *lateWriter) bind(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.early.Len() > 0 {
		_, _ = w.Write(l.early.Bytes())
		l.early.Reset()
	}
	l.w = w
}
