package execute

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// A shell that remembers: unless a call asks for a fresh shell, execute
// runs each command after restoring the working directory and the exported
// variables that the thread's earlier commands left, the way a person's
// terminal carries them from one command line to the next. Each command
// still gets a new (or spare) login shell, so timeouts, kills and the
// awaiting-input check work on it as on any command.
//
// How: the command's shell first runs restore code made here (cd, unset,
// export) — a spare shell gets it with the command on its pipe, a new
// shell sources it from a file — records its exported variables, and
// evaluates the command; then, or at an exit, it records the directory and
// the exported variables again in a file the agent reads once the command
// ended. Only a command that exits by itself
// within its call changes the thread's state — by the variables it changed
// (not the ones the login profile set), so an edit of ~/.profile still
// shows in the next command. A command that timed out, was interrupted or
// killed, or went on in the background leaves the state as it was.

// maxShellThreads bounds how many threads' shell states are kept; the one
// used longest ago goes first.
const maxShellThreads = 256

// maxShellRecord bounds the record a command's shell writes; a larger one
// (a huge exported variable) is not taken and the state stays as it was.
const maxShellRecord = 1 << 20

// Variables the shell sets itself; they are never carried over.
var shellOwnVars = map[string]bool{"PWD": true, "OLDPWD": true, "SHLVL": true, "_": true}

// threadKey carries the thread of a call in its context (WithThread).
type threadKey struct{}

// WithThread returns ctx marked as carrying calls of the named thread:
// execute keeps one remembered shell state per thread. Calls without it
// share the state of the unnamed thread (enough where a sandbox serves one
// thread).
func WithThread(ctx context.Context, thread string) context.Context {
	return context.WithValue(ctx, threadKey{}, thread)
}

func threadOf(ctx context.Context) string {
	name, _ := ctx.Value(threadKey{}).(string)
	return name
}

// shellState is what a thread's commands left: the directory the last one
// ended in and the exported variables they set or unset.
type shellState struct {
	cwd   string
	set   map[string]string
	unset map[string]bool
	used  uint64 // the memory's clock at the last use
}

// shellMemory holds the threads' shell states and the per-call files. It is
// safe for concurrent use.
type shellMemory struct {
	dir string // per-call restore and record files, created on first use

	mu      sync.Mutex
	threads map[string]*shellState
	clock   uint64
}

// shellCall is one command's restore code and its files: the record its
// shell writes and, when the code goes in one, the file it is sourced from.
type shellCall struct {
	thread  string
	code    string // restores the state, sets up the record, sets __boxwire_c; one line
	base    string // where the restore file goes; the record is base.rec
	restore string // the restore file, once written (fileScript)
	record  string // "" for a background job, which records nothing
}

// stateFileError is a failure to write a restore file.
type stateFileError struct{ err error }

func (e *stateFileError) Error() string { return "write shell state file: " + e.err.Error() }
func (e *stateFileError) Unwrap() error { return e.err }

// cwd returns the directory the thread's next command starts in, "" when
// its commands left none.
func (m *shellMemory) cwd(thread string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.threads[thread]; st != nil {
		return st.cwd
	}
	return ""
}

// prepare makes the restore code for a command of thread; the command's
// shell runs inlineScript or fileScript instead of command. With record
// false (a background job) the shell restores the state but records
// nothing. It touches no file but the folder they go in.
func (m *shellMemory) prepare(thread, command string, record bool) (*shellCall, error) {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return nil, fmt.Errorf("shell state directory: %w", err)
	}
	sc := &shellCall{thread: thread, base: filepath.Join(m.dir, fmt.Sprintf("sh-%016x", rand.Uint64()))}
	if record {
		sc.record = sc.base + ".rec"
	}
	sc.code = m.restoreScript(thread, sc.record, command)
	return sc, nil
}

// inlineScript is the script that runs the command with the restore code
// in it, for a spare shell's pipe. The command stays in __boxwire_c (a
// shell variable, not exported) so that eval's messages quote it alone; it
// is evaluated on the script's first line, so its line numbers are its
// own, as in bash -c.
func (sc *shellCall) inlineScript() string {
	return sc.code + sc.tail()
}

// fileScript writes the restore code to a file, unless an earlier call
// did, and returns the script that sources it and runs the command: short,
// for a command line or a pipe too small for inlineScript.
func (sc *shellCall) fileScript() (string, error) {
	if sc.restore == "" {
		f, err := os.OpenFile(sc.base, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return "", &stateFileError{err}
		}
		sc.restore = sc.base // remove deletes it, whole or not
		_, err = f.WriteString(sc.code)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", &stateFileError{err}
		}
	}
	return ". " + shellQuote(sc.restore) + " || exit 125; " + sc.tail(), nil
}

// tail runs the command and, with a record, records at its end.
func (sc *shellCall) tail() string {
	if sc.record == "" {
		return `eval "$__boxwire_c"`
	}
	return `eval "$__boxwire_c"; __boxwire_end`
}

// restoreScript is the shell code that puts thread's state back and, when
// record names a file, records the variables now and everything at exit.
// It is one line of statements, each ended by "; " (lineQuote keeps
// newlines out of the values), so that a script can go on after it on the
// same line.
func (m *shellMemory) restoreScript(thread, record, command string) string {
	var b strings.Builder
	m.mu.Lock()
	if st := m.threads[thread]; st != nil {
		m.clock++
		st.used = m.clock
		if len(st.unset) > 0 {
			b.WriteString("unset -v")
			for _, name := range slices.Sorted(maps.Keys(st.unset)) {
				b.WriteString(" " + name)
			}
			b.WriteString(" 2>/dev/null; ")
		}
		for _, name := range slices.Sorted(maps.Keys(st.set)) {
			fmt.Fprintf(&b, "export %s=%s; ", name, lineQuote(st.set[name]))
		}
		if st.cwd != "" {
			q := lineQuote(st.cwd)
			fmt.Fprintf(&b, "cd -- %s 2>/dev/null || printf 'boxwire: %%s is gone; starting in %%s\\n' %s \"$PWD\" >&2; ", q, q)
		}
	}
	m.mu.Unlock()
	if record != "" {
		q := lineQuote(record)
		// export -p is a builtin: no fork (parsed by parseExports).
		fmt.Fprintf(&b, "{ printf 'B\\0'; export -p; printf '\\0'; } > %s 2>/dev/null; ", q)
		// __boxwire_end records after the command; exit records first. A
		// subshell's exit records nothing; a command killed, exec'd or
		// stopped by set -e records nothing either (no EXIT trap: with one,
		// bash would catch the kill signals and end differently).
		fmt.Fprintf(&b, "__boxwire_pid=$BASHPID; "+
			"__boxwire_save() { [[ $BASHPID == \"$__boxwire_pid\" ]] || return 0; { set +eux; } 2>/dev/null; "+
			"{ printf 'E\\0%%s\\0' \"$PWD\"; export -p; printf '\\0Z\\0'; } >> %s 2>/dev/null; }; ", q)
		b.WriteString(`exit() { __boxwire_s=$?; __boxwire_save; builtin exit "${@:-$__boxwire_s}"; }; ` +
			`__boxwire_end() { __boxwire_s=$?; __boxwire_save; builtin exit "$__boxwire_s"; }; `)
	}
	b.WriteString("__boxwire_c=" + lineQuote(command) + "; ")
	return b.String()
}

// commit takes what the command of sc recorded into its thread's state and
// returns the directory the command ended in ("" when it recorded
// nothing usable). Call it only for a command that exited by itself.
func (m *shellMemory) commit(sc *shellCall) string {
	if sc.record == "" {
		return ""
	}
	raw, err := readCapped(sc.record, maxShellRecord)
	if err != nil {
		return ""
	}
	before, cwd, after, ok := parseShellRecord(raw)
	if !ok {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.threads[sc.thread]
	if st == nil {
		if m.threads == nil {
			m.threads = map[string]*shellState{}
		}
		m.evictLocked()
		st = &shellState{set: map[string]string{}, unset: map[string]bool{}}
		m.threads[sc.thread] = st
	}
	m.clock++
	st.used, st.cwd = m.clock, strings.Clone(cwd)
	for name, v := range after {
		if old, had := before[name]; !had || old != v {
			st.set[name] = strings.Clone(v) // not the whole record's text
			delete(st.unset, name)
		}
	}
	for name := range before {
		if _, kept := after[name]; !kept {
			st.unset[name] = true
			delete(st.set, name)
		}
	}
	return cwd
}

// evictLocked makes room for one more thread. Called with m.mu held.
func (m *shellMemory) evictLocked() {
	for len(m.threads) >= maxShellThreads {
		oldest := ""
		for name, st := range m.threads {
			if oldest == "" || st.used < m.threads[oldest].used {
				oldest = name
			}
		}
		delete(m.threads, oldest)
	}
}

// remove deletes the call's files.
func (sc *shellCall) remove() {
	if sc.restore != "" {
		_ = os.Remove(sc.restore)
	}
	if sc.record != "" {
		_ = os.Remove(sc.record)
	}
}

// parseShellRecord reads a record: "B", export -p at start, "E", the
// directory, export -p at exit, "Z", each NUL-terminated. ok is false
// unless both parts are whole.
func parseShellRecord(raw []byte) (before map[string]string, cwd string, after map[string]string, ok bool) {
	f := strings.Split(string(raw), "\x00")
	if len(f) != 7 || f[0] != "B" || f[2] != "E" || f[3] == "" || f[5] != "Z" || f[6] != "" {
		return nil, "", nil, false
	}
	before, ok1 := parseExports(f[1])
	after, ok2 := parseExports(f[4])
	return before, f[3], after, ok1 && ok2
}

// readCapped reads path when it holds at most limit bytes.
func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: more than %d bytes", filepath.Base(path), limit)
	}
	return b, nil
}

// shellQuote quotes s for bash as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// lineQuote quotes s for bash as one word on one line: as shellQuote does,
// or, when s holds a newline, as $'…' with the newline, backslash and
// single quote escaped (every other byte stands for itself there).
func lineQuote(s string) string {
	if !strings.Contains(s, "\n") {
		return shellQuote(s)
	}
	return "$'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}
