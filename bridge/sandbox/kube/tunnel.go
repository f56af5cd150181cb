package kube

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Tunnel timings.
const (
	// dialWait bounds reading a stream's name and dialing its socket.
	dialWait = 5 * time.Second
	// retryMin and retryMax bound the pause before starting a lost relay
	// again; a session that lived stableAfter starts the pause over.
	retryMin    = 100 * time.Millisecond
	retryMax    = 5 * time.Second
	stableAfter = 10 * time.Second
)

// tunnel carries one pod's sockets over the relay (package doc): it
// listens on the agent's socket in the sandbox's agent folder on this
// host and keeps a relay session to the pod, starting it again when it
// is lost while the pod runs. Its goroutines are counted in wg; stop ends
// and waits for them.
type tunnel struct {
	k         *Kube
	pod       string
	uid       types.UID // the pod's: a later pod of the same name gets a tunnel of its own
	socketDir string
	agentSock string
	sockets   []string // the bridge folder's sockets the pod may reach
	log       *slog.Logger
	ln        *net.UnixListener

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	sess *yamux.Session // the live session, nil while there is none
}

// startTunnel starts the tunnel of the running pod p unless it has one,
// the manager is closed, a Stop or Remove of p's name is under way, or p's
// folders are not on this host (a pod of another bridge's host, or of a
// sandbox made without folders). A tunnel left under p's name by an
// earlier pod of that name (a suspended thread's, resumed) is ended first.
func (k *Kube) startTunnel(p *corev1.Pod) {
	a := p.Annotations
	agentDir := a[annAgentDir]
	if agentDir == "" || !wire.ValidRelayName(a[annAgentSocket]) {
		return
	}
	k.mu.Lock()
	old := k.tunnels[p.Name]
	if k.closed || k.endings[p.Name] > 0 || old != nil && old.uid == p.UID {
		k.mu.Unlock()
		return
	}
	if old != nil {
		old.shutLocked()
	}
	k.mu.Unlock()
	if old != nil {
		old.log.Debug("tunnel: ended, left by an earlier pod of this name", "uid", old.uid, "new_uid", p.UID)
		old.wait()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed || k.endings[p.Name] > 0 || k.tunnels[p.Name] != nil {
		return
	}
	if fi, err := os.Stat(agentDir); err != nil || !fi.IsDir() {
		return
	}
	t := &tunnel{
		k: k, pod: p.Name, uid: p.UID, socketDir: a[annSocketDir], agentSock: a[annAgentSocket],
		log: k.log.With("pod", p.Name, "component", "tunnel"),
	}
	for _, s := range strings.Split(a[annSockets], ",") {
		if wire.ValidRelayName(s) {
			t.sockets = append(t.sockets, s)
		}
	}
	ln, err := wire.RelayListen(filepath.Join(agentDir, t.agentSock))
	if err != nil {
		t.log.Warn("tunnel: listen for the agent", "err", err)
		return
	}
	t.ln = ln
	t.ctx, t.cancel = context.WithCancel(context.Background())
	k.tunnels[p.Name] = t
	t.wg.Add(2)
	go t.accept()
	go t.keep()
}

// endTunnel ends the tunnel of the pod name (if any), waits for it, and
// keeps a new one from starting for that name (an Inspect racing a Stop or
// Remove would see the pod still running) until the returned func is
// called.
func (k *Kube) endTunnel(name string) (done func()) {
	k.mu.Lock()
	k.endings[name]++
	t := k.tunnels[name]
	if t != nil {
		t.shutLocked()
	}
	k.mu.Unlock()
	if t != nil {
		t.wait()
	}
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.endings[name]--; k.endings[name] <= 0 {
			delete(k.endings, name)
		}
	}
}

// shutLocked, with k.mu held, takes t out of the manager's tunnels (when it
// is there) and closes its context and its listener, which removes its
// socket file. Under the lock, so that no new tunnel of the same pod name
// listens on that path before this close removes it.
func (t *tunnel) shutLocked() {
	if t.k.tunnels[t.pod] == t {
		delete(t.k.tunnels, t.pod)
	}
	t.cancel()
	t.ln.Close()
}

// wait closes t's session (after shutLocked) and waits until every one of
// its goroutines has ended.
func (t *tunnel) wait() {
	if s := t.session(); s != nil {
		s.Close()
	}
	t.wg.Wait()
}

// session returns the live session (nil when there is none).
func (t *tunnel) session() *yamux.Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sess
}

func (t *tunnel) setSession(s *yamux.Session) {
	t.mu.Lock()
	t.sess = s
	t.mu.Unlock()
}

// accept turns each connection to the agent's host socket into a stream
// to the agent's socket in the pod; without a session it closes the
// connection (the fleet's greeter dials again).
func (t *tunnel) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			return
		}
		s := t.session()
		if s == nil {
			c.Close()
			continue
		}
		st, err := s.OpenStream()
		if err != nil {
			c.Close()
			continue
		}
		t.wg.Add(1)
		go t.carry(c, st, t.agentSock)
	}
}

// carry pipes c and st until both are done or the tunnel stops; with
// name set it first writes st's opening line.
func (t *tunnel) carry(c net.Conn, st *yamux.Stream, name string) {
	defer t.wg.Done()
	defer c.Close()
	defer st.Close()
	defer context.AfterFunc(t.ctx, func() { c.Close(); st.Close() })()
	if name != "" {
		if err := wire.WriteRelayName(st, name); err != nil {
			return
		}
	}
	wire.RelayPipe(c, st)
}

// keep runs relay sessions one after the other while the pod runs and the
// tunnel is not stopped.
func (t *tunnel) keep() {
	defer t.wg.Done()
	pause := retryMin
	for {
		began := time.Now()
		up, err := t.run()
		if t.ctx.Err() != nil {
			return
		}
		p, gerr := t.k.cs.CoreV1().Pods(t.k.ns).Get(t.ctx, t.pod, metav1.GetOptions{})
		if apierrors.IsNotFound(gerr) || gerr == nil && (p.UID != t.uid || !toSandbox(p).Running) {
			t.log.Debug("tunnel: the pod stopped", "err", err)
			t.k.mu.Lock()
			t.shutLocked()
			t.k.mu.Unlock()
			return
		}
		if time.Since(began) > stableAfter {
			pause = retryMin
		}
		if up {
			t.log.Debug("tunnel: relay session ended; starting it again", "err", err, "in", pause)
		} else { // an exec the API server refuses (RBAC), a relay that cannot start
			t.log.Warn("tunnel: could not start the relay in the pod; trying again", "err", err, "in", pause)
		}
		select {
		case <-t.ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, retryMax)
	}
}

// relayCommand is the relay's command line in the pod.
func (t *tunnel) relayCommand() []string {
	cmd := []string{sandbox.AgentBinaryPath, "relay",
		"--dial", t.agentSock + "=" + sandbox.AgentMount + "/" + t.agentSock}
	for _, s := range t.sockets {
		cmd = append(cmd, "--serve", sandbox.SocketMount+"/"+s)
	}
	return cmd
}

// run runs one relay session: it starts the relay over an exec stream,
// waits for its first answer, then serves the streams it opens until the
// exec stream or the session ends. up says the relay answered.
func (t *tunnel) run() (up bool, err error) {
	u := t.k.cs.CoreV1().RESTClient().Post().Namespace(t.k.ns).Resource("pods").Name(t.pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: agentContainer, Command: t.relayCommand(), Stdin: true, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec).URL()
	ex, err := newExecutor(t.k.rest, u)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	logw := newLineLog(t.log)
	streamed := make(chan error, 1)
	go func() {
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: logw})
		outW.CloseWithError(io.EOF)
		inR.Close()
		logw.Close()
		streamed <- err
	}()
	defer func() {
		cancel()
		if serr := <-streamed; !up && serr != nil {
			err = fmt.Errorf("exec the relay: %w", serr)
		}
	}()
	ycfg := yamux.DefaultConfig()
	ycfg.LogOutput = io.Discard
	sess, err := yamux.Client(pipeConn{outR, inW}, ycfg)
	if err != nil {
		return false, fmt.Errorf("relay session: %w", err)
	}
	defer sess.Close()
	if _, err := sess.Ping(); err != nil {
		return false, fmt.Errorf("relay did not answer: %w", err)
	}
	t.setSession(sess)
	defer t.setSession(nil)
	t.wg.Add(1)
	go t.serveRelay(sess)
	<-sess.CloseChan()
	return true, errors.New("relay session closed")
}

// serveRelay connects each stream the relay opens to the bridge's socket
// it names, until the session ends.
func (t *tunnel) serveRelay(sess *yamux.Session) {
	defer t.wg.Done()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			return
		}
		st.SetReadDeadline(time.Now().Add(dialWait))
		name, err := wire.ReadRelayName(st)
		st.SetReadDeadline(time.Time{})
		if err != nil || !slices.Contains(t.sockets, name) {
			t.log.Warn("tunnel: the relay asked for a socket it may not reach", "socket", name, "err", err)
			st.Close()
			continue
		}
		c, err := net.DialTimeout("unix", filepath.Join(t.socketDir, name), dialWait)
		if err != nil {
			t.log.Warn("tunnel: dial the bridge's socket", "socket", name, "err", err)
			st.Close()
			continue
		}
		t.wg.Add(1)
		go t.carry(c, st, "")
	}
}

// newExecutor is kubectl's exec transport: WebSocket, falling back to SPDY
// where the API server does not upgrade to it.
func newExecutor(rc *rest.Config, u *url.URL) (remotecommand.Executor, error) {
	ws, err := remotecommand.NewWebSocketExecutor(rc, "GET", u.String())
	if err != nil {
		return nil, fmt.Errorf("exec over websocket: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(rc, "POST", u)
	if err != nil {
		return nil, fmt.Errorf("exec over spdy: %w", err)
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// pipeConn is the exec stream as one connection: read the relay's
// stdout, write its stdin.
type pipeConn struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (p pipeConn) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipeConn) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipeConn) Close() error {
	p.w.Close()
	return p.r.Close()
}

// lineLog logs each line written to it (the relay's stderr) at debug.
type lineLog struct {
	pw   *io.PipeWriter
	done chan struct{}
}

func newLineLog(log *slog.Logger) *lineLog {
	pr, pw := io.Pipe()
	l := &lineLog{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			log.Debug("relay", "line", sc.Text())
		}
		pr.Close()
	}()
	return l
}

func (l *lineLog) Write(b []byte) (int, error) { return l.pw.Write(b) }

// Close ends the log and waits for its reader.
func (l *lineLog) Close() error {
	l.pw.Close()
	<-l.done
	return nil
}
