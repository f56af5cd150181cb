package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// cleanupTimeout bounds the removal of a half-created sandbox; it runs on a
// context detached from the caller's, which may already have ended.
const cleanupTimeout = 30 * time.Second

// createTimeout bounds the engine calls of one Create; see Create.
const createTimeout = 2 * time.Minute

// Create creates and starts a hardened sandbox for spec and returns its
// state once the engine reports it started (not when its agent is ready).
// When spec.WorkspaceVolume names a volume that does not exist, it is created
// with spec.Labels. On any failure the container, and a volume this call
// created, are removed before Create returns. Errors wrap
// ErrEngineUnavailable or ErrImageNotFound where those apply.
//
// When ctx ends first, Create returns at once with ctx's error, but the
// engine's work is not cut off halfway: an engine asked to create a
// container finishes doing so even when its client goes away, and a create
// abandoned then would leave a container whose id nobody knows (and a
// workspace volume it holds). The work goes on in the background (at most
// createTimeout, or until Close) and removes what it made. So a caller
// that gives up never leaves a sandbox behind.
func (d *Docker) Create(ctx context.Context, spec Spec) (Sandbox, error) {
	sb, err := d.createDetached(ctx, spec)
	if err != nil {
		return Sandbox{}, fmt.Errorf("create sandbox %s: %w", specName(spec), err)
	}
	return sb, nil
}

// createDetached runs create on a context of its own (see Create). The
// background goroutine is tracked by d.bg; Close ends and waits for it.
func (d *Docker) createDetached(ctx context.Context, spec Spec) (Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return Sandbox{}, d.mapErr(err, nil)
	}
	type result struct {
		sb  Sandbox
		err error
	}
	var (
		mu        sync.Mutex
		committed bool // create succeeded: its result is the caller's
		abandoned bool // the caller left: create must undo itself
		done      = make(chan result, 1)
	)
	// commit is create's last step: it hands the sandbox to the caller, or
	// reports that the caller has left (create then removes it).
	commit := func() error {
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			return ctx.Err()
		}
		committed = true
		return nil
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	stop := context.AfterFunc(d.closing, cancel)
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		defer cancel()
		defer stop()
		sb, err := d.create(ectx, spec, commit)
		done <- result{sb, err}
	}()
	select {
	case r := <-done:
		return r.sb, r.err
	case <-ctx.Done():
	}
	mu.Lock()
	if committed { // finished just now: the result is on its way
		mu.Unlock()
		r := <-done
		return r.sb, r.err
	}
	abandoned = true
	mu.Unlock()
	return Sandbox{}, d.mapErr(ctx.Err(), nil)
}

// create makes the sandbox on ctx (the engine's context). Its last step
// is commit; when commit fails (the caller left), what create made is
// removed.
func (d *Docker) create(ctx context.Context, spec Spec, commit func() error) (sb Sandbox, err error) {
	if spec.Image == "" {
		return Sandbox{}, errors.New("spec has no image")
	}
	unlock := func() {}
	defer func() { unlock() }()
	if spec.WorkspaceVolume != "" {
		// Held until the container exists, so that Remove cannot detach the
		// workspace in between (workspace_detach.go).
		unlock = d.ws.volumes.Lock(spec.WorkspaceVolume)
		created, verr := d.ensureVolume(ctx, spec.WorkspaceVolume, spec.Labels)
		if verr != nil {
			return Sandbox{}, verr
		}
		if created {
			defer func() {
				if err != nil {
					d.cleanupVolume(ctx, spec.WorkspaceVolume)
				}
			}()
		}
	}
	res, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       spec.Name,
		Config:     d.containerConfig(spec),
		HostConfig: d.hostConfig(spec),
	})
	unlock() // before a failed start's cleanup, whose Remove locks it
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return Sandbox{}, fmt.Errorf("%w: %s: %w", ErrImageNotFound, spec.Image, err)
		}
		return Sandbox{}, d.mapErr(err, nil)
	}
	log := d.log.With("sandbox", res.ID, "name", spec.Name)
	for _, w := range res.Warnings {
		log.Warn("engine warning on create", "warning", w)
	}
	defer func() {
		if err != nil {
			d.cleanupContainer(ctx, res.ID)
		}
	}()
	if _, err := d.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return Sandbox{}, fmt.Errorf("start container %s: %w", res.ID, d.mapErr(err, nil))
	}
	sb, err = d.Inspect(ctx, res.ID)
	if err != nil {
		return Sandbox{}, err
	}
	if err := commit(); err != nil {
		log.Debug("sandbox started after its caller gave up; removing it")
		return Sandbox{}, err
	}
	log.Debug("sandbox started", "image", spec.Image)
	return sb, nil
}

// containerConfig is the container's own configuration for spec.
func (d *Docker) containerConfig(spec Spec) *container.Config {
	return &container.Config{
		Image:  spec.Image,
		Env:    spec.Env,
		Cmd:    spec.Cmd,
		User:   spec.User,
		Labels: maps.Clone(spec.Labels),
	}
}

// hostConfig is the hardened host configuration for spec.
func (d *Docker) hostConfig(spec Spec) *container.HostConfig {
	lim := Limits{
		PidsLimit:   spec.PidsLimit,
		MemoryBytes: spec.MemoryBytes,
		NanoCPUs:    spec.NanoCPUs,
	}.withDefaults(d.defaults)
	runtime := d.runtime
	if spec.Runtime != "" {
		runtime = spec.Runtime
	}
	secOpts := []string{"no-new-privileges"}
	if d.seccomp != "" {
		secOpts = append(secOpts, "seccomp="+d.seccomp)
	}
	hc := &container.HostConfig{
		NetworkMode:    "none",
		CapDrop:        []string{"ALL"},
		SecurityOpt:    secOpts,
		ReadonlyRootfs: true,
		Init:           &d.init,
		Runtime:        runtime,
		// The agent's own log, bounded on the host's disk (logs.go).
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{
			"max-size": logMaxSize, "max-file": logMaxFiles,
		}},
		Tmpfs: map[string]string{
			"/tmp": "rw,nosuid,nodev,mode=1777,size=" + strconv.FormatInt(lim.TmpfsBytes, 10),
		},
		Resources: container.Resources{
			PidsLimit:  &lim.PidsLimit,
			Memory:     lim.MemoryBytes,
			MemorySwap: lim.MemoryBytes, // equal to Memory: no swap on top
			NanoCPUs:   lim.NanoCPUs,
		},
	}
	for _, b := range []struct {
		source, target string
		readOnly       bool
	}{
		{spec.SocketDir, SocketMount, true},
		{spec.AgentBinary, AgentBinaryPath, true},
		{spec.AgentDir, AgentMount, false},
	} {
		if b.source != "" {
			hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: b.source, Target: b.target, ReadOnly: b.readOnly})
		}
	}
	if spec.WorkspaceVolume != "" {
		// The labels matter only if the engine creates the volume itself:
		// it does when a create cancelled mid-way (a pooled sandbox evicted
		// while starting) removed the volume before the engine made the
		// container. Labelled, such a volume is found and removed like any
		// other; unlabelled, nothing would ever find it.
		hc.Mounts = append(hc.Mounts, mount.Mount{
			Type:          mount.TypeVolume,
			Source:        spec.WorkspaceVolume,
			Target:        WorkspaceMount,
			VolumeOptions: &mount.VolumeOptions{Labels: spec.Labels},
		})
	}
	return hc
}

// ensureVolume creates the named volume with labels unless it exists, and
// reports whether it created it. A new volume is a capped workspace when
// the manager caps them (workspace.go); an existing capped one has its loop
// device attached again if it was detached (a host reboot).
func (d *Docker) ensureVolume(ctx context.Context, name string, labels map[string]string) (bool, error) {
	res, err := d.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	if err == nil {
		if err := d.ws.reattach(ctx, res.Volume.Options); err != nil {
			return false, fmt.Errorf("attach workspace %s: %w", name, err)
		}
		return false, nil
	}
	if !cerrdefs.IsNotFound(err) {
		return false, fmt.Errorf("inspect volume %s: %w", name, d.mapErr(err, nil))
	}
	opts := client.VolumeCreateOptions{Name: name, Labels: labels}
	if d.ws.cfg.Capped() {
		if opts.DriverOpts, err = d.ws.create(ctx, name); err != nil {
			return false, fmt.Errorf("create workspace %s: %w", name, err)
		}
		opts.Driver = "local"
	}
	_, err = d.cli.VolumeCreate(ctx, opts)
	if err != nil {
		if opts.DriverOpts != nil {
			img, link := d.ws.paths(name)
			d.ws.cleanup(ctx, img, link)
		}
		return false, fmt.Errorf("create volume %s: %w", name, d.mapErr(err, nil))
	}
	d.log.Debug("volume created", "volume", name)
	return true, nil
}

// cleanupContainer force-removes a half-created container. Failures are
// logged here, where they are handled: the caller already has an error.
func (d *Docker) cleanupContainer(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := d.Remove(ctx, id); err != nil {
		d.log.Warn("remove half-created sandbox", "sandbox", id, "err", err)
	}
}

// cleanupVolume removes a volume created by a failed Create, and first
// any container that uses it: a create whose context ended may still have
// been carried out by the engine (it finishes a container creation whose
// client went away), leaving a container nobody knows the id of, which
// holds the volume "in use" — RemoveVolume would wait for it in vain.
func (d *Docker) cleanupVolume(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	f := client.Filters{}
	f.Add("volume", name)
	var err error
	for ctx.Err() == nil {
		// The container may appear only after a first look (the engine
		// still working on the abandoned create): look again each round.
		if res, lerr := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); lerr == nil {
			for _, c := range res.Items {
				if rerr := d.Remove(ctx, c.ID); rerr != nil {
					d.log.Warn("remove container of failed sandbox", "sandbox", c.ID, "volume", name, "err", rerr)
				}
			}
		}
		try, cancelTry := context.WithTimeout(ctx, volumeTryTimeout)
		err = d.RemoveVolume(try, name)
		cancelTry()
		if err == nil {
			return
		}
	}
	d.log.Warn("remove volume of failed sandbox", "volume", name, "err", err)
}

// volumeTryTimeout bounds one round of cleanupVolume's removal (its own
// retries included) before it looks again for a container using the
// volume.
const volumeTryTimeout = 2 * time.Second

// specName names spec in errors: its name, else its image.
func specName(spec Spec) string {
	if spec.Name != "" {
		return spec.Name
	}
	return spec.Image
}
