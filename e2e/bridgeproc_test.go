package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/server"
	bolt "go.etcd.io/bbolt"
)

// bridgeProc is a running bridge binary.
type bridgeProc struct {
	cmd  *exec.Cmd
	url  string // http://127.0.0.1:PORT
	done chan struct{}
	err  error // after done

	mu  sync.Mutex
	log strings.Builder
}

var listenRE = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

// startBridge runs the bridge binary with extra environment and waits until
// it says where it listens.
func (e *env) startBridge(extraEnv ...string) *bridgeProc {
	e.t.Helper()
	b, err := e.launchBridge(extraEnv...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.bridge = b
	e.t.Cleanup(func() { b.stop(e.t) })
	return b
}

func (e *env) launchBridge(extraEnv ...string) (*bridgeProc, error) {
	cmd := exec.Command(bridgeBin, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(),
		"BOXWIRE_TOKEN="+e.token,
		"BOXWIRE_IMAGE="+image,
		"BOXWIRE_DATA_DIR="+e.dataDir,
		"BOXWIRE_BRIDGE_ID="+e.id,
		"BOXWIRE_MODEL=scripted",
		"OPENAI_BASE_URL="+e.llmURL,
		"OPENAI_API_KEY="+e.apiKey,
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start bridge: %w", err)
	}
	b := &bridgeProc{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			b.mu.Lock()
			b.log.WriteString(line + "\n")
			b.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		b.err = cmd.Wait()
		close(b.done)
	}()
	select {
	case b.url = <-found:
		return b, nil
	case <-b.done:
		return b, fmt.Errorf("bridge exited before listening (%v):\n%s", b.err, b.logText())
	case <-time.After(startTimeout):
		cmd.Process.Kill()
		<-b.done
		return b, fmt.Errorf("bridge did not listen within %v:\n%s", startTimeout, b.logText())
	}
}

func (b *bridgeProc) logText() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.log.String()
}

// stop sends SIGTERM and waits (bounded) for the bridge to exit.
func (b *bridgeProc) stop(t *testing.T) {
	select {
	case <-b.done:
		return
	default:
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(startTimeout):
		b.cmd.Process.Kill()
		<-b.done
		t.Errorf("bridge did not stop within %v after SIGTERM", startTimeout)
	}
	if t.Failed() {
		t.Logf("bridge log:\n%s", b.logText())
	}
}

// runGC runs `bridge gc` for this env's bridge id and data dir.
func (e *env) runGC(extraEnv ...string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bridgeBin, "gc")
	cmd.Env = append(os.Environ(), "BOXWIRE_BRIDGE_ID="+e.id, "BOXWIRE_DATA_DIR="+e.dataDir)
	cmd.Env = append(cmd.Env, extraEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("bridge gc: %v\n%s", err, out)
	}
}

// awaitPoolReady waits until the bridge logged n pooled sandboxes ready.
func awaitPoolReady(t *testing.T, e *env, n int) {
	t.Helper()
	waitFor(t, "warm pool sandbox ready", func() bool {
		return strings.Count(e.bridge.logText(), "warm pool: sandbox ready") >= n
	})
}

// awaitStoredInflight waits until the bridge's store file holds, among
// the thread's requests in flight, one whose payload contains text: the
// state a bridge killed now restarts from. The bridge holds the file's
// lock, so each poll reads a copy; a copy taken mid-write may not open
// or read, and is retried.
func (e *env) awaitStoredInflight(thread, text string) {
	e.t.Helper()
	dir := e.t.TempDir()
	waitFor(e.t, "the request in flight in the store", func() bool {
		return storedInflightHas(filepath.Join(e.dataDir, server.StoreFile), filepath.Join(dir, "copy.db"), thread, text)
	})
}

// storedInflightHas copies the store file src to dst and reports whether
// the copy's inflight list of thread has a request containing text.
func storedInflightHas(src, dst, thread, text string) (found bool) {
	defer func() {
		if recover() != nil { // a torn copy can trip bbolt: not yet
			found = false
		}
	}()
	data, err := os.ReadFile(src)
	if err != nil || os.WriteFile(dst, data, 0o600) != nil {
		return false
	}
	db, err := bolt.Open(dst, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return false
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("inflight")); b != nil {
			found = strings.Contains(string(b.Get([]byte(thread))), text)
		}
		return nil
	})
	return found
}
