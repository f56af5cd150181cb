package execute

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/boxwire/boxwire/agent/shell"
	"golang.org/x/sys/unix"
)

// spareWrapper is what a spare shell runs. Prepared as every command's
// shell is (the OOM killer picks it first, no core dumps), it starts as a
// login shell and reads its profile, then waits for the command on fd 3 and
// evaluates it: the same as bash -lc "$command", with the start-up paid
// before the command arrives. read -N (as many characters as come before
// the agent closes the pipe) reads the pipe 4 KiB at a time; read -d, or
// a plain read, takes a pipe one byte per system call.
const spareWrapper = `echo 1000 > /proc/self/oom_score_adj 2>/dev/null; ulimit -c 0 2>/dev/null; ` +
	`exec bash -l -c 'IFS= read -r -N 2147483647 __boxwire_cmd <&3; exec 3<&-; eval "unset __boxwire_cmd; $__boxwire_cmd"'`

// spareDelay is how long after a command ended its successor's shell
// starts: long enough for the ended command's result to leave first (the
// sandbox may have a single CPU, and a login shell's start-up would compete
// with it), short enough to be ready for the model's next call.
const spareDelay = 20 * time.Millisecond

// maxSpares is how many spare shells wait at most (a few MiB each).
const maxSpares = 2

// maxSpareEarlyOutput bounds what a spare may print (from its profile)
// before a command claims it; the claiming job gets it first.
const maxSpareEarlyOutput = 64 << 10

// spare is a shell started ahead of time, waiting for a command on a pipe.
// The job manager keeps up to maxSpares, started after a command ends, so
// the next commands — a model often asks for several in one answer — skip
// process and login-shell start-up (most of the latency of a small
// command). A spare runs a single command, then it is a job like any other.
type spare struct {
	proc     *shell.Process
	dir      string
	cmdW     *os.File // write end of the spare's fd 3
	pipeSize int      // what the pipe holds unread
	out      *lateWriter
	stamp    string // of the login files when it started (profileStamp)
}

// loginFiles are what a login bash reads at start. A spare whose files
// changed since it started (a command edited ~/.profile, say) is not used:
// the next command must see the profile as it is now. Files those source
// in turn are not followed.
var loginFiles = []string{"/etc/profile", "/etc/bash.bashrc", "/etc/profile.d",
	"~/.bash_profile", "~/.bash_login", "~/.profile", "~/.bashrc"}

// profileStamp summarizes the login files' sizes and modification times.
func (m *jobManager) profileStamp() string {
	var b strings.Builder
	for _, f := range loginFiles {
		if strings.HasPrefix(f, "~/") {
			f = filepath.Join(m.home, f[2:])
		}
		if fi, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%s:%d:%d;", f, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String()
}

// startSpare launches a spare shell in dir.
func (m *jobManager) startSpare(dir string) (*spare, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("spare shell: %w", err)
	}
	defer r.Close()           // the child has its own copy
	stamp := m.profileStamp() // before the shell reads the files
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
	return &spare{proc: proc, dir: dir, cmdW: w, pipeSize: pipeSize(w), out: out, stamp: stamp}, nil
}

// pipeSize is what the pipe w holds (F_GETPIPE_SZ), or the least a pipe
// holds (a page) when that cannot be told.
func pipeSize(w *os.File) int {
	n := os.Getpagesize()
	rc, err := w.SyscallConn()
	if err != nil {
		return n
	}
	_ = rc.Control(func(fd uintptr) {
		if size, err := unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0); err == nil && size > 0 {
			n = size
		}
	})
	return n
}

// claim hands command to the spare, in the remembered shell sc unless it
// is nil, and binds its output to j. The restore code goes on the pipe
// with the command when the pipe holds the whole script at once (the write
// then never waits for the spare) and the command has no NUL byte; else it
// goes in a file. A shell variable cannot hold a NUL byte: a fresh command
// ends at its first one (read -N would drop it and read on). claim fails,
// and the caller starts the command the ordinary way, when the spare died
// while waiting; it fails with a stateFileError, and the spare is
// discarded, when the restore file cannot be written.
func (s *spare) claim(command string, sc *shellCall, j *job) (*shell.Process, error) {
	script, _, _ := strings.Cut(command, "\x00")
	if sc != nil {
		script = sc.inlineScript()
		if len(script) > s.pipeSize || strings.Contains(command, "\x00") {
			var err error
			if script, err = sc.fileScript(); err != nil {
				s.discard()
				return nil, err
			}
		}
	}
	_, err := io.WriteString(s.cmdW, script)
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

// takeSpare returns the newest spare for dir whose login files did not
// change since it started, and forgets it; stale ones are discarded. Called
// with m.mu held.
func (m *jobManager) takeSpare(dir string) *spare {
	stamp := ""
	for i := len(m.spares) - 1; i >= 0; i-- {
		s := m.spares[i]
		if s.dir != dir {
			continue
		}
		if stamp == "" {
			stamp = m.profileStamp()
		}
		m.spares = append(m.spares[:i], m.spares[i+1:]...)
		if s.stamp == stamp {
			return s
		}
		m.stale = append(m.stale, s) // discarded by the next refill, off this path
	}
	return nil
}

// refill starts spares for dir in the background until maxSpares are
// ready. The goroutine belongs to the manager's WaitGroup; one runs at a
// time.
func (m *jobManager) refill(dir string) {
	m.mu.Lock()
	if m.closed || len(m.spares) >= maxSpares || m.refilling {
		m.mu.Unlock()
		return
	}
	m.refilling = true
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		select {
		case <-time.After(spareDelay):
		case <-m.quit:
			m.mu.Lock()
			m.refilling = false
			m.mu.Unlock()
			return
		}
		m.mu.Lock()
		stale := m.stale
		m.stale = nil
		m.mu.Unlock()
		for _, s := range stale {
			s.discard()
		}
		for {
			s, err := m.startSpare(dir)
			m.mu.Lock()
			keep := err == nil && !m.closed
			if keep {
				m.spares = append(m.spares, s)
			}
			more := keep && len(m.spares) < maxSpares
			m.refilling = more
			m.mu.Unlock()
			if err == nil && !keep {
				s.discard()
			}
			if !more {
				return
			}
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
