package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// Default limits, used where both the Spec and DockerConfig.Defaults leave a
// limit at zero.
const (
	DefaultPidsLimit   int64 = 512
	DefaultMemoryBytes int64 = 2 << 30 // 2 GiB
	DefaultNanoCPUs    int64 = 1e9     // 1 CPU
	DefaultTmpfsBytes  int64 = 256 << 20
)

// Limits bound a sandbox's resources. A zero field means the package
// default (DefaultPidsLimit and friends).
type Limits struct {
	// PidsLimit is the most processes and threads the sandbox may have.
	PidsLimit int64
	// MemoryBytes is the memory limit; swap is not allowed on top of it.
	MemoryBytes int64
	// NanoCPUs is the CPU quota in billionths of a CPU.
	NanoCPUs int64
	// TmpfsBytes is the size of the tmpfs at /tmp (it counts against
	// MemoryBytes when used).
	TmpfsBytes int64
}

// withDefaults fills zero fields from def, then from the package defaults.
func (l Limits) withDefaults(def Limits) Limits {
	pick := func(v, d, pkg int64) int64 {
		switch {
		case v > 0:
			return v
		case d > 0:
			return d
		}
		return pkg
	}
	return Limits{
		PidsLimit:   pick(l.PidsLimit, def.PidsLimit, DefaultPidsLimit),
		MemoryBytes: pick(l.MemoryBytes, def.MemoryBytes, DefaultMemoryBytes),
		NanoCPUs:    pick(l.NanoCPUs, def.NanoCPUs, DefaultNanoCPUs),
		TmpfsBytes:  pick(l.TmpfsBytes, def.TmpfsBytes, DefaultTmpfsBytes),
	}
}

// DockerConfig configures Docker. The zero value talks to the engine named by
// DOCKER_HOST (or the default unix socket) with default limits.
type DockerConfig struct {
	// Host is the engine address ("unix:///var/run/docker.sock",
	// "tcp://127.0.0.1:2375"). Empty means DOCKER_HOST (and the other
	// DOCKER_* variables the SDK reads), else the default unix socket.
	Host string
	// Logger receives debug and warning records; nil discards them.
	Logger *slog.Logger
	// Defaults are the limits for specs that leave a limit at zero.
	Defaults Limits
	// SeccompProfile, when set, is the JSON text of a seccomp profile
	// applied to every sandbox instead of the engine's default.
	SeccompProfile string
	// Runtime, when set, is the OCI runtime to use ("runsc" for gVisor);
	// empty means the engine's default. Spec.Runtime overrides it.
	Runtime string
	// Init runs the engine's init (docker run --init) as PID 1. Leave it
	// false for images that bring their own (boxwire's image runs tini).
	Init bool
	// Workspace caps the size of new workspace volumes (workspace.go); the
	// zero value makes plain, uncapped volumes.
	Workspace WorkspaceConfig
}

// Docker is a Manager on the Docker Engine API. It is safe for concurrent
// use. Every method blocks until the engine answers or ctx ends; none starts
// a goroutine that outlives the call.
type Docker struct {
	cli       *client.Client
	host      string
	log       *slog.Logger
	defaults  Limits
	seccomp   string
	runtime   string
	init      bool
	ws        *workspaces
	closeOnce sync.Once

	// removing holds a slot for each container removal in flight: at most
	// maxRemovals at once (ops.go).
	removing chan struct{}

	// closing ends when Close is called; bg tracks the creates that go on
	// after their caller left (create.go), which Close waits for.
	closing context.Context
	stopAll context.CancelFunc
	bg      sync.WaitGroup
}

var _ Manager = (*Docker)(nil)

// NewDocker returns a Docker for cfg. It does not contact the engine (call
// Ping for that); the API version is negotiated on the first request. The
// caller must Close it.
func NewDocker(cfg DockerConfig) (*Docker, error) {
	opts := []client.Opt{client.FromEnv}
	if cfg.Host != "" {
		opts = append(opts, client.WithHost(cfg.Host))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ws, err := newWorkspaces(cfg.Workspace, log)
	if err != nil {
		cli.Close()
		return nil, err
	}
	closing, stopAll := context.WithCancel(context.Background())
	return &Docker{
		closing:  closing,
		stopAll:  stopAll,
		cli:      cli,
		host:     cli.DaemonHost(),
		log:      log.With("engine", cli.DaemonHost()),
		defaults: cfg.Defaults,
		seccomp:  cfg.SeccompProfile,
		runtime:  cfg.Runtime,
		init:     cfg.Init,
		ws:       ws,
		removing: make(chan struct{}, maxRemovals),
	}, nil
}

// Host returns the engine address in use.
func (d *Docker) Host() string { return d.host }

// Ping checks that the engine answers and negotiates the API version. It
// returns an error wrapping ErrEngineUnavailable when the engine cannot be
// reached or does not answer before ctx ends.
func (d *Docker) Ping(ctx context.Context) error {
	_, err := d.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	if err == nil {
		return nil
	}
	return fmt.Errorf("ping engine: %w", d.mapErr(err, nil))
}

// Close ends the creates still running after their callers left (they
// remove what they made) and waits for them, then releases the engine
// connection. It is idempotent; the Docker must not be used afterwards.
func (d *Docker) Close() error {
	var err error
	d.closeOnce.Do(func() {
		d.stopAll()
		d.bg.Wait()
		d.ws.closeSpare() // workspace_spare.go
		err = d.cli.Close()
	})
	return err
}

// unavailable wraps err with ErrEngineUnavailable and the host.
func (d *Docker) unavailable(err error) error {
	return fmt.Errorf("%w at %s: %w", ErrEngineUnavailable, d.host, err)
}

// mapErr turns an engine error into one wrapping this package's sentinels
// where one applies: a connection failure, or no answer before ctx's
// deadline, becomes ErrEngineUnavailable (still wrapping the cause, so
// errors.Is(err, context.DeadlineExceeded) holds too), and a missing object
// becomes notFound (when notFound is not nil).
func (d *Docker) mapErr(err, notFound error) error {
	switch {
	case err == nil:
		return nil
	case client.IsErrConnectionFailed(err), errors.Is(err, context.DeadlineExceeded):
		return d.unavailable(err)
	case notFound != nil && cerrdefs.IsNotFound(err):
		return fmt.Errorf("%w: %w", notFound, err)
	}
	return err
}
