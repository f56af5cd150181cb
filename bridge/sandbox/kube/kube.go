package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/boxwire/boxwire/bridge/sandbox"
)

// Defaults where Config leaves a field at zero.
const (
	DefaultNamespace     = "default"
	DefaultWorkspaceSize = "10Gi"
	DefaultCPURequest    = "100m"
	DefaultMemoryRequest = "128Mi"
	// DefaultStartTimeout bounds waiting for a new pod to run.
	DefaultStartTimeout = 2 * time.Minute
	// DefaultDeleteGrace is the pod's termination grace period.
	DefaultDeleteGrace = 2 * time.Second
)

// connectWait bounds Connect's first call to the API server.
const connectWait = 10 * time.Second

// Workspace kinds (Config.Workspace).
const (
	// WorkspaceClaim puts the workspace on a PersistentVolumeClaim named
	// after Spec.WorkspaceVolume: it outlives the pod (suspend, replace).
	WorkspaceClaim = "claim"
	// WorkspaceEmptyDir puts it on an emptyDir: it ends with the pod (short
	// threads; a replaced sandbox starts empty).
	WorkspaceEmptyDir = "emptydir"
)

// Config configures a Kube. The zero value uses the in-cluster config (or
// $KUBECONFIG, else ~/.kube/config), the default namespace and claims of
// the cluster's default StorageClass.
type Config struct {
	// Kubeconfig is the kubeconfig file; empty means in-cluster when the
	// bridge runs in a pod, else clientcmd's defaults ($KUBECONFIG,
	// ~/.kube/config).
	Kubeconfig string
	// Namespace holds every pod and claim; empty means DefaultNamespace.
	Namespace string
	// Logger receives debug and warning records; nil discards them.
	Logger *slog.Logger
	// Defaults are the limits for specs that leave a limit at zero
	// (PidsLimit is the node's: the kubelet's podPidsLimit).
	Defaults sandbox.Limits
	// CPURequest and MemoryRequest are what a pod asks the scheduler for
	// (Kubernetes quantities); empty means DefaultCPURequest and
	// DefaultMemoryRequest. The limits are Defaults'.
	CPURequest, MemoryRequest string
	// RuntimeClass is the RuntimeClass of every pod ("gvisor"); empty means
	// the node's default. Spec.Runtime, when set, names the class instead.
	RuntimeClass string
	// SeccompProfile, when set, is a Localhost seccomp profile (a path
	// relative to the kubelet's seccomp folder) used instead of
	// RuntimeDefault.
	SeccompProfile string
	// Workspace is WorkspaceClaim (the default) or WorkspaceEmptyDir.
	Workspace string
	// StorageClass is the claims' class; empty means the cluster default.
	StorageClass string
	// WorkspaceSize is the size claims ask for; empty means
	// DefaultWorkspaceSize.
	WorkspaceSize string
	// PullPolicy is the pods' image pull policy; empty means IfNotPresent.
	PullPolicy corev1.PullPolicy
	// StartTimeout bounds waiting for a pod to run; zero means
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// DeleteGrace is the pods' termination grace period; zero means
	// DefaultDeleteGrace.
	DeleteGrace time.Duration
	// Rest, when set, is used instead of Kubeconfig (tests).
	Rest *rest.Config
}

// Kube is a sandbox.Manager on the Kubernetes API. It is safe for
// concurrent use. Its calls block until the API server answers or ctx
// ends; the only goroutines it keeps are the tunnels of the sandboxes it
// runs (tunnel.go), which Remove and Close end and wait for.
type Kube struct {
	cfg  Config
	rest *rest.Config
	cs   kubernetes.Interface
	ns   string
	host string
	log  *slog.Logger

	req, cpuReq resource.Quantity
	wsSize      resource.Quantity

	mu        sync.Mutex
	tunnels   map[string]*tunnel // by pod name
	endings   map[string]int     // pod names a Stop or Remove is ending
	closed    bool
	closeOnce sync.Once
	// closing ends when Close is called; wg counts the creates that go on
	// after their caller left (create.go), which Close ends and waits for.
	closing context.Context
	stopAll context.CancelFunc
	wg      sync.WaitGroup
}

var _ sandbox.Manager = (*Kube)(nil)

// New returns a Kube for cfg without contacting the API server (Ping does).
// The caller must Close it.
func New(cfg Config) (*Kube, error) {
	rc := cfg.Rest
	if rc == nil {
		var err error
		if rc, err = restConfig(cfg.Kubeconfig); err != nil {
			return nil, err
		}
	}
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	switch cfg.Workspace {
	case "":
		cfg.Workspace = WorkspaceClaim
	case WorkspaceClaim, WorkspaceEmptyDir:
	default:
		return nil, fmt.Errorf("kubernetes workspace %q: want %q or %q", cfg.Workspace, WorkspaceClaim, WorkspaceEmptyDir)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.DeleteGrace <= 0 {
		cfg.DeleteGrace = DefaultDeleteGrace
	}
	if cfg.PullPolicy == "" {
		cfg.PullPolicy = corev1.PullIfNotPresent
	}
	k := &Kube{cfg: cfg, rest: rc, cs: cs, ns: cfg.Namespace, host: rc.Host, tunnels: map[string]*tunnel{}, endings: map[string]int{}}
	k.closing, k.stopAll = context.WithCancel(context.Background())
	for _, q := range []struct {
		dst      *resource.Quantity
		val, def string
		what     string
	}{
		{&k.cpuReq, cfg.CPURequest, DefaultCPURequest, "cpu request"},
		{&k.req, cfg.MemoryRequest, DefaultMemoryRequest, "memory request"},
		{&k.wsSize, cfg.WorkspaceSize, DefaultWorkspaceSize, "workspace size"},
	} {
		v := q.val
		if v == "" {
			v = q.def
		}
		if *q.dst, err = resource.ParseQuantity(v); err != nil {
			return nil, fmt.Errorf("kubernetes %s %q: %w", q.what, v, err)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k.log = log.With("engine", "kubernetes", "namespace", k.ns)
	return k, nil
}

// restConfig loads the client config: kubeconfig when named, in-cluster
// when running in a pod, else clientcmd's default loading rules.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		if rc, err := rest.InClusterConfig(); err == nil {
			return rc, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes config (kubeconfig %q): %w", kubeconfig, err)
	}
	return rc, nil
}

// Connect makes a Kube for cfg and checks, within ten seconds, that the
// API server answers and the namespace's pods can be listed (else the
// error wraps sandbox.ErrEngineUnavailable). The caller closes it.
func Connect(ctx context.Context, cfg Config) (*Kube, error) {
	k, err := New(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, connectWait)
	defer cancel()
	if err := k.Ping(ctx); err != nil {
		k.Close()
		return nil, fmt.Errorf("the Kubernetes API server is not reachable (host %s): %w", k.host, err)
	}
	return k, nil
}

// MountsHostFolders says false: a pod has folders of its own and never
// mounts the bridge's (the tunnel carries their sockets), so the bridge
// keeps its agent folders private and needs no tmpfs mount for them
// (boxdir.Config.Private; an in-cluster bridge runs without
// CAP_SYS_ADMIN).
func (k *Kube) MountsHostFolders() bool { return false }

// Host returns the API server's address.
func (k *Kube) Host() string { return k.host }

// Namespace returns the namespace the sandboxes live in.
func (k *Kube) Namespace() string { return k.ns }

// Ping lists one pod of the namespace: it checks that the API server
// answers and that the bridge may read the namespace. Errors wrap
// sandbox.ErrEngineUnavailable.
func (k *Kube) Ping(ctx context.Context) error {
	if _, err := k.cs.CoreV1().Pods(k.ns).List(ctx, listOne); err != nil {
		return fmt.Errorf("%w at %s: list pods in %s: %w", sandbox.ErrEngineUnavailable, k.host, k.ns, err)
	}
	return nil
}

// Close ends every tunnel and the creates still running after their
// callers left (they remove what they made), and waits for them. It
// leaves the pods running (a restarted bridge adopts them). It is
// idempotent.
func (k *Kube) Close() error {
	k.closeOnce.Do(func() {
		k.stopAll()
		k.mu.Lock()
		k.closed = true
		ts := make([]*tunnel, 0, len(k.tunnels))
		for _, t := range k.tunnels {
			ts = append(ts, t)
		}
		for _, t := range ts {
			t.shutLocked()
		}
		k.mu.Unlock()
		for _, t := range ts {
			t.wait()
		}
		k.wg.Wait()
	})
	return nil
}

// mapErr turns an API error into one wrapping this package's sentinels
// where one applies: no answer (a refused connection, a timeout) becomes
// ErrEngineUnavailable, a missing object notFound (when not nil).
func (k *Kube) mapErr(err, notFound error) error {
	var uerr *url.Error
	var nerr net.Error
	switch {
	case err == nil:
		return nil
	case notFound != nil && apierrors.IsNotFound(err):
		return fmt.Errorf("%w: %w", notFound, err)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &uerr), errors.As(err, &nerr),
		apierrors.IsServiceUnavailable(err), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return fmt.Errorf("%w at %s: %w", sandbox.ErrEngineUnavailable, k.host, err)
	}
	return err
}
