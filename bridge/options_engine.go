package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/sandbox/kube"
)

// Engines --engine names.
const (
	engineDocker     = "docker"
	engineKubernetes = "kubernetes"
)

// engineOptions say which engine runs the sandboxes and, for Kubernetes,
// where (docs/kubernetes.md).
type engineOptions struct {
	engine       string // engineDocker or engineKubernetes
	kubeconfig   string // "": in-cluster, else $KUBECONFIG or ~/.kube/config
	namespace    string
	storageClass string // the workspace claims' class ("": the cluster default)
	kubeWS       string // kube.WorkspaceClaim or kube.WorkspaceEmptyDir
	pullPolicy   string // the pods' image pull policy
	startTimeout time.Duration
}

// engineFlags adds the engine flags to fs, with defaults from getenv.
func (e *engineOptions) engineFlags(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&e.engine, "engine", envOr(getenv, "BOXWIRE_ENGINE", engineDocker), "what runs the sandboxes: docker (the local engine) or kubernetes (a pod per sandbox, docs/kubernetes.md)")
	fs.StringVar(&e.kubeconfig, "kubeconfig", getenv("BOXWIRE_KUBECONFIG"), "kubeconfig file for --engine kubernetes (default: in-cluster config, else $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&e.namespace, "namespace", envOr(getenv, "BOXWIRE_NAMESPACE", kube.DefaultNamespace), "namespace of the sandbox pods and their workspace claims (--engine kubernetes)")
	fs.StringVar(&e.storageClass, "storage-class", getenv("BOXWIRE_STORAGE_CLASS"), "StorageClass of the workspace claims (--engine kubernetes; default: the cluster's default class)")
	fs.StringVar(&e.pullPolicy, "image-pull-policy", envOr(getenv, "BOXWIRE_IMAGE_PULL_POLICY", string(corev1.PullIfNotPresent)), "the pods' image pull policy: IfNotPresent, Always or Never (--engine kubernetes)")
	fs.DurationVar(&e.startTimeout, "kube-start-timeout", envDur(getenv, "BOXWIRE_KUBE_START_TIMEOUT", kube.DefaultStartTimeout), "how long a new pod may take to run before its sandbox fails with why it does not (unschedulable, a claim that does not bind) (--engine kubernetes)")
	fs.StringVar(&e.kubeWS, "kube-workspace", envOr(getenv, "BOXWIRE_KUBE_WORKSPACE", kube.WorkspaceClaim), "workspace of a pod: claim (a PersistentVolumeClaim that outlives the pod) or emptydir (ends with it)")
}

// checkEngine refuses an unknown engine or flags that do not fit it.
func (e engineOptions) checkEngine() error {
	switch e.engine {
	case engineDocker, engineKubernetes:
	default:
		return fmt.Errorf("--engine %q: want %s or %s", e.engine, engineDocker, engineKubernetes)
	}
	switch corev1.PullPolicy(e.pullPolicy) {
	case corev1.PullIfNotPresent, corev1.PullAlways, corev1.PullNever:
	default:
		return fmt.Errorf("--image-pull-policy %q: want IfNotPresent, Always or Never", e.pullPolicy)
	}
	if e.startTimeout <= 0 {
		return fmt.Errorf("--kube-start-timeout %v: want a positive duration", e.startTimeout)
	}
	if e.kubeWS != kube.WorkspaceClaim && e.kubeWS != kube.WorkspaceEmptyDir {
		return fmt.Errorf("--kube-workspace %q: want %s or %s", e.kubeWS, kube.WorkspaceClaim, kube.WorkspaceEmptyDir)
	}
	return nil
}

// kubeConfig is the Kubernetes manager's configuration: the engine flags,
// the limits, --runtime as the RuntimeClass, --workspace-size as the
// claims' size and --seccomp as RuntimeDefault (builtin, engine) or a
// Localhost profile (localhost/NAME).
func (o options) kubeConfig(log *slog.Logger) (kube.Config, error) {
	cfg := kube.Config{
		Kubeconfig: o.kubeconfig, Namespace: o.namespace, Logger: log.With("component", "sandbox"),
		Defaults: o.limits, RuntimeClass: o.runtime, Workspace: o.kubeWS, StorageClass: o.storageClass,
		PullPolicy: corev1.PullPolicy(o.pullPolicy), StartTimeout: o.startTimeout,
	}
	if o.workspaceSize > 0 {
		cfg.WorkspaceSize = fmt.Sprint(o.workspaceSize)
	}
	switch name, ok := strings.CutPrefix(o.seccomp, "localhost/"); {
	case o.seccomp == "builtin", o.seccomp == "engine", o.seccomp == "":
	case ok && name != "":
		cfg.SeccompProfile = name
	default:
		return cfg, fmt.Errorf("--seccomp %q on kubernetes: want builtin or engine (RuntimeDefault) or localhost/NAME (a profile in the kubelet's seccomp folder)", o.seccomp)
	}
	return cfg, nil
}

// connectEngine makes the sandbox manager of --engine and checks that it
// answers.
func (o options) connectEngine(ctx context.Context, getenv func(string) string, log *slog.Logger) (sandbox.Manager, error) {
	if o.engine != engineKubernetes {
		return o.connect(ctx, getenv, log)
	}
	cfg, err := o.kubeConfig(log)
	if err != nil {
		return nil, err
	}
	// client-go logs through klog (to stderr by default): into the
	// bridge's log instead, at debug — an exec stream the bridge ends on
	// purpose (a removed pod's relay) is logged there as an error.
	klog.SetSlogLogger(slog.New(debugOnly{log.With("component", "client-go").Handler()}))
	return kube.Connect(ctx, cfg)
}

// collectWorkspaces removes the workspace images no volume names, on
// engines that make them (Docker's capped workspaces).
func collectWorkspaces(ctx context.Context, mgr sandbox.Manager) (int, error) {
	if c, ok := mgr.(interface {
		CollectWorkspaces(context.Context) (int, error)
	}); ok {
		return c.CollectWorkspaces(ctx)
	}
	return 0, nil
}

// debugOnly logs every record at debug level.
type debugOnly struct{ slog.Handler }

// Handle logs r at debug.
func (d debugOnly) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	if !d.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return d.Handler.Handle(ctx, r)
}

// Enabled is true: Handle decides at debug level.
func (d debugOnly) Enabled(context.Context, slog.Level) bool { return true }
