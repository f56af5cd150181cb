package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/sandbox"
)

// resources are what a box owns outside the process. remove deletes
// them; fields left empty were never created. Only sandboxID changes after
// creation (a replacement, lifecycle.go): read and set it with sandbox and
// setSandbox, which are safe for concurrent use; so is the agent build the
// current sandbox's agent named in its hello (build, setBuild).
type resources struct {
	dirs      boxdir.Dirs // the sandbox's host folders; zero when not made
	proxy     *llmproxy.Listener
	egress    *egress.Listener
	volume    string
	runtime   string // the sandbox's OCI runtime; its posture is checked under it
	mu        sync.Mutex
	sandboxID string     // guarded by mu once the resources are shared
	agent     AgentBuild // guarded by mu: what the newest greeted agent named
}

// build is what the agent greeted last named of its build.
func (r *resources) build() AgentBuild {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.agent
}

// setBuild records what a greeted agent named of its build.
func (r *resources) setBuild(a AgentBuild) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.agent = a
}

// sandbox is the id of the current sandbox ("" before it was created).
func (r *resources) sandbox() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sandboxID
}

// setSandbox records the current sandbox.
func (r *resources) setSandbox(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sandboxID = id
}

// keepingVolume is r without its workspace volume: what to remove when a
// suspended thread (suspend.go) or another thread still owns the volume.
func (r *resources) keepingVolume() *resources {
	return &resources{dirs: r.dirs, proxy: r.proxy, egress: r.egress, sandboxID: r.sandbox()}
}

// remove deletes the sandbox, its workspace volume, the proxies and the
// host folders, in that order, and reports every failure.
func (r *resources) remove(ctx context.Context, mgr sandbox.Manager) error {
	var errs []error
	if id := r.sandbox(); id != "" {
		if err := mgr.Remove(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", id, err))
		}
	}
	if r.volume != "" {
		if err := mgr.RemoveVolume(ctx, r.volume); err != nil {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", r.volume, err))
		}
	}
	if err := r.closeProxies(); err != nil {
		errs = append(errs, err)
	}
	if r.dirs.Bridge != "" {
		if err := r.dirs.Remove(); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox folders: %w", err))
		}
	}
	return errors.Join(errs...)
}

// closeProxies stops serving the sandbox's LLM and egress proxies (the
// sockets in its folder) and reports every failure.
func (r *resources) closeProxies() error {
	var errs []error
	if r.proxy != nil {
		if err := r.proxy.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close llm proxy: %w", err))
		}
	}
	if r.egress != nil {
		if err := r.egress.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close egress proxy: %w", err))
		}
	}
	return errors.Join(errs...)
}
