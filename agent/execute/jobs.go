package execute

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/boxwire/boxwire/agent/shell"
	"github.com/boxwire/boxwire/bridge/wire"
)

// wrapper prepares a command's shell before running it as a login shell:
// the kernel's OOM killer picks it before the agent, and it dumps no core.
const wrapper = `echo 1000 > /proc/self/oom_score_adj 2>/dev/null; ulimit -c 0 2>/dev/null; exec bash -lc "$1"`

// maxFinishedJobs bounds how many ended background jobs stay listed.
const maxFinishedJobs = 50

// jobManager runs commands and keeps the ones that went on in the
// background. It owns one watcher goroutine per command, which Close waits
// for. It is safe for concurrent use.
type jobManager struct {
	store *outputStore
	limit int // model-visible bytes of one output
	grace time.Duration
	env   []string
	cols  uint16
	rows  uint16

	memory *shellMemory // the threads' remembered shells (shellstate.go)
	cgroup memCgroup    // the sandbox's memory cgroup, for OOM kills (oom.go)

	mu        sync.Mutex
	jobs      map[string]*job
	seq       int
	closed    bool
	spares    []*spare      // shells waiting for the next commands (spare.go)
	stale     []*spare      // spares found stale, to discard
	home      string        // HOME of commands, for the login files (spare.go)
	refilling bool          // a spare is being started
	quit      chan struct{} // closed by Close: a pending refill gives up
	wg        sync.WaitGroup
}

// job is one command on a PTY. Fields above mu are set at start.
type job struct {
	id      string
	command string
	dir     string
	started time.Time
	proc    *shell.Process
	done    chan struct{} // closed once the command ended and was cleaned up
	limit   int
	shell   *shellCall // the remembered shell's files; nil for a fresh shell
	// oomBefore is the cgroup's OOM kill count when the command started;
	// oomKnown is false when it could not be read (oom.go).
	oomBefore int64
	oomKnown  bool

	mu         sync.Mutex
	clean      *cleaner
	capture    *capture
	file       *outFile
	stream     func([]byte)
	lastOutput time.Time
	background bool
	ended      time.Time
	code       int
	waitErr    error
	stopReason string // set when we stopped it: timed_out, interrupted, killed
	oom        string // the error, when the OOM killer ended it (SIGKILL and a new OOM kill)
	keptPath   string // the full-output file, once kept
	cwd        string // where the remembered shell ended, once taken (shellstate.go)
}

var errJobsClosed = errors.New("the agent is shutting down")

// start launches command in dir: in the remembered shell sc, or a fresh
// one when sc is nil. stream, when not nil, receives the raw output until
// the job is detached.
func (m *jobManager) start(command string, sc *shellCall, dir string, stream func([]byte)) (*job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errJobsClosed
	}
	m.seq++
	j := &job{
		id:         "j" + strconv.Itoa(m.seq),
		command:    command,
		started:    time.Now(),
		done:       make(chan struct{}),
		limit:      m.limit,
		capture:    newCapture(m.limit),
		stream:     stream,
		lastOutput: time.Now(),
		shell:      sc,
	}
	j.file = m.store.newFile(j.id, m.limit)
	j.clean = &cleaner{out: io.MultiWriter(j.capture, j.file)}
	j.dir = dir
	j.oomBefore, j.oomKnown = m.cgroup.oomKills()
	proc, err := m.launch(command, sc, dir, j)
	if err != nil {
		j.file.finish(false)
		if sc != nil {
			sc.remove()
		}
		return nil, err
	}
	j.proc = proc
	m.jobs[j.id] = j
	m.wg.Add(1)
	go m.watch(j)
	return j, nil
}

// launch runs command for j, in the remembered shell sc unless it is nil:
// on the spare shell when one is ready (see spare.go), else on a new shell.
// Called with m.mu held.
func (m *jobManager) launch(command string, sc *shellCall, dir string, j *job) (*shell.Process, error) {
	if s := m.takeSpare(dir); s != nil {
		proc, err := s.claim(command, sc, j)
		if err == nil {
			return proc, nil
		}
		if _, ok := errors.AsType[*stateFileError](err); ok {
			return nil, err // a new shell could not have the file either
		}
	}
	script := command
	if sc != nil {
		var err error
		if script, err = sc.fileScript(); err != nil {
			return nil, err
		}
	}
	return shell.Start(context.Background(), shell.Spec{
		Command:   []string{"bash", "-c", wrapper, "boxwire-exec", script},
		Dir:       dir,
		Env:       m.env,
		Cols:      m.cols,
		Rows:      m.rows,
		Stdin:     shell.StdinNull,
		Output:    j,
		KillGrace: m.grace,
	})
}

// watch waits for the job's command to end, kills what it left in its
// process group and records the outcome.
func (m *jobManager) watch(j *job) {
	defer m.wg.Done()
	code, err := j.proc.Wait()
	_ = j.proc.Close()
	j.mu.Lock()
	j.clean.FlushLine()
	j.code, j.waitErr, j.ended = code, err, time.Now()
	if j.stopReason == "" && m.oomKilled(j) {
		j.oom = m.cgroup.oomMessage()
	}
	keep := j.background || j.capture.total > int64(j.limit)
	if keep && j.file != nil {
		j.file.open() // made already, unless the job went on in the background as it ended
		j.keptPath = j.file.path
	}
	j.stream = nil
	file := j.file
	// A remembered shell's state is taken only from a command that ended
	// by itself while its call waited (not killed, not in the background).
	if j.shell != nil && !j.background && j.stopReason == "" && j.oom == "" && err == nil {
		j.cwd = m.memory.commit(j.shell)
	}
	j.mu.Unlock()
	if j.shell != nil {
		j.shell.remove()
	}
	file.finish(keep)
	// The next command's shell starts now, after this one ended, so that it
	// reads the profile as this command left it; before the call returns,
	// so that whoever saw the result sees the refill under way (refill
	// only schedules it).
	m.refill(j.dir)
	close(j.done)
	m.trim()
}

// sigkill is the exit code of a command killed by SIGKILL (128+9), as
// the OOM killer kills.
const sigkill = 137

// oomKilled says whether j's command, which ended by itself, was killed
// by the OOM killer: it died of SIGKILL (or its shell said so, exiting
// 137) and the cgroup counted an OOM kill since it started. Another
// command's OOM kill in the same window counts too; the sandbox ran out
// of memory either way. Called with j.mu held.
func (m *jobManager) oomKilled(j *job) bool {
	if j.code != sigkill || !j.oomKnown {
		return false
	}
	n, ok := m.cgroup.oomKills()
	return ok && n > j.oomBefore
}

// Write receives the command's raw terminal output (from the process's
// read loop).
func (j *job) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lastOutput = time.Now()
	_, _ = j.clean.Write(p)
	if j.stream != nil {
		j.stream(p)
	}
	return len(p), nil
}

// kill stops the command's process group, recording why, and blocks until
// it is gone.
func (j *job) kill(reason string) {
	j.mu.Lock()
	if j.stopReason == "" && !j.hasEnded() {
		j.stopReason = reason
	}
	j.mu.Unlock()
	_ = j.proc.Close()
	<-j.done
}

func (j *job) hasEnded() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// detach turns the job into a background job: streaming stops, the job
// is listed by jobs() and its full output goes to a file (unless it ended:
// its watcher then has the file).
func (j *job) detach() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stream = nil
	j.background = true
	j.clean.FlushLine()
	if j.ended.IsZero() {
		j.file.open()
	}
}

// idleFor says how long the command has produced no output.
func (j *job) idleFor() time.Duration {
	j.mu.Lock()
	defer j.mu.Unlock()
	return time.Since(j.lastOutput)
}

// lookup returns the background job id.
func (m *jobManager) lookup(id string) (*job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[id]
	if ok {
		j.mu.Lock()
		ok = j.background
		j.mu.Unlock()
	}
	if !ok {
		return nil, fmt.Errorf("no background job %q; call jobs to list them", id)
	}
	return j, nil
}

// forget drops a foreground job once its call is answered.
func (m *jobManager) forget(j *job) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j.mu.Lock()
	bg := j.background
	j.mu.Unlock()
	if !bg {
		delete(m.jobs, j.id)
	}
}

// list returns the background jobs, oldest first.
func (m *jobManager) list() []*job {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*job
	for _, j := range m.jobs {
		j.mu.Lock()
		if j.background {
			out = append(out, j)
		}
		j.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b *job) int { return a.started.Compare(b.started) })
	return out
}

// trim forgets the oldest ended background jobs beyond maxFinishedJobs.
func (m *jobManager) trim() {
	var ended []*job
	for _, j := range m.list() {
		if j.hasEnded() {
			ended = append(ended, j)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := 0; i < len(ended)-maxFinishedJobs; i++ {
		delete(m.jobs, ended[i].id)
	}
}

// Close kills every running command and waits for the watchers. It is
// idempotent.
func (m *jobManager) Close() {
	m.mu.Lock()
	if !m.closed {
		close(m.quit)
	}
	m.closed = true
	spares := append(m.spares, m.stale...)
	m.spares, m.stale = nil, nil
	all := make([]*job, 0, len(m.jobs))
	for _, j := range m.jobs {
		all = append(all, j)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, j := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j.kill(wire.StatusKilled)
		}()
	}
	wg.Wait()
	for _, s := range spares {
		s.discard()
	}
	m.wg.Wait()
}
