package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/store/pgstore"
	"github.com/boxwire/boxwire/bridge/web"
)

// options are the bridge's settings from flags and the environment (flags
// win).
type options struct {
	listen, token, image, dataDir, model, id string
	images, runtimes                         []string
	allowedHosts                             []string        // Host names served besides IPs and localhost
	previewDomain                            string          // host-form preview URLs (docs/preview.md)
	oidc                                     auth.OIDCConfig // Issuer "" means none
	userLimits                               auth.Limits
	runtime, seccomp                         string
	maxSandboxes                             int
	pool                                     int           // warm pool size per image (docs/pool.md)
	poolIdle                                 time.Duration // empty an unused pool after this long
	maxUpload                                int64         // bytes of one file upload request (0: server default)
	idleTTL, maxLifetime, reapInterval       time.Duration
	threadTTL, recycleGrace                  time.Duration // suspended-thread retention; wait for work before a recycle
	limits                                   sandbox.Limits
	init                                     bool
	policy                                   string // approval policy file (approvals.go)
	retention                                store.Retention
	logOutputCap                             int // tool_output bytes of one call kept in the log (0: server default)
	storeSync                                time.Duration
	workspaceSize                            int64 // workspace volume cap in bytes (0: uncapped)

	// egressThreadMax: rules a thread's own egress rules must fall within (docs/egress-thread.md)
	egressThreadMax []string

	// store is where threads and events are kept (--store): "" for the
	// bbolt file <data-dir>/boxwire.db, or a postgres:// URL (checkStore).
	store string
	// leaseTTL is how long the bridge's leases last unrenewed (--lease-ttl).
	leaseTTL time.Duration
	// advertiseURL is where the other bridges reach this one (--advertise-url).
	advertiseURL string

	// Rollouts (docs/lifecycle.md): the pace of moving live sandboxes to a
	// rebuilt image; a file of allowed images re-read on SIGHUP; an agent
	// binary mounted into new sandboxes.
	rollout     fleet.RolloutConfig
	imagesFile  string
	agentBinary string
	// tlsCert and tlsKey serve HTTPS; insecureHTTP serves the web page
	// over plain HTTP beyond loopback (docs/web.md).
	tlsCert, tlsKey string
	insecureHTTP    bool
	// oidcLogin is the page's OIDC sign-in (ClientID "" means none).
	oidcLogin     web.OIDCLogin
	engineOptions // --engine and where its sandboxes run (options_engine.go)

	hostToolsOptions // --host-tools (options_hosttools.go)
}

// parseOptions reads args (after any subcommand) with defaults from getenv.
func parseOptions(name string, args []string, getenv func(string) string) (options, error) {
	var o options
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	env := func(key, def string) string { return envOr(getenv, key, def) }
	fs.StringVar(&o.listen, "listen", env("BOXWIRE_BRIDGE_LISTEN", "127.0.0.1:7420"), "address to serve on")
	fs.StringVar(&o.token, "token", getenv("BOXWIRE_TOKEN"), "bearer token clients must present (required)")
	fs.StringVar(&o.image, "image", env("BOXWIRE_IMAGE", "boxwire:latest"), "default sandbox image")
	images := fs.String("images", getenv("BOXWIRE_IMAGES"), "comma-separated images a thread may choose besides --image")
	fs.StringVar(&o.dataDir, "data-dir", env("BOXWIRE_DATA_DIR", "/var/lib/boxwire"), "state folder")
	fs.StringVar(&o.model, "model", getenv("BOXWIRE_MODEL"), "model name passed to agents")
	fs.StringVar(&o.id, "id", getenv("BOXWIRE_BRIDGE_ID"), "owner label on this bridge's sandboxes (default: the host name)")
	fs.StringVar(&o.runtime, "runtime", getenv("BOXWIRE_RUNTIME"), "OCI runtime of sandboxes, e.g. runsc (default: the engine's)")
	runtimes := fs.String("runtimes", getenv("BOXWIRE_RUNTIMES"), "comma-separated runtimes a thread may choose besides --runtime")
	fs.StringVar(&o.seccomp, "seccomp", env("BOXWIRE_SECCOMP", "builtin"), "seccomp profile: builtin, engine, or a JSON file")
	fs.IntVar(&o.pool, "pool", envInt(getenv, "BOXWIRE_POOL", 0), "started sandboxes kept ready per image for new threads (0: off)")
	fs.DurationVar(&o.poolIdle, "pool-idle", envDur(getenv, "BOXWIRE_POOL_IDLE", 10*time.Minute), "empty an image's warm pool nobody took from for this long")
	fs.IntVar(&o.maxSandboxes, "max-sandboxes", envInt(getenv, "BOXWIRE_MAX_SANDBOXES", 20), "most live sandboxes (0: no bound)")
	fs.DurationVar(&o.idleTTL, "idle-ttl", envDur(getenv, "BOXWIRE_IDLE_TTL", 30*time.Minute), "suspend a sandbox unused this long (the thread stays; the next attach starts a new sandbox)")
	fs.DurationVar(&o.maxLifetime, "max-lifetime", envDur(getenv, "BOXWIRE_MAX_LIFETIME", 24*time.Hour), "replace a sandbox this long after creation (same workspace, conversation kept)")
	fs.DurationVar(&o.threadTTL, "thread-ttl", envDur(getenv, "BOXWIRE_THREAD_TTL", 72*time.Hour), "remove a suspended thread (idle: no sandbox) with its log and workspace this long after it was suspended")
	fs.DurationVar(&o.recycleGrace, "recycle-grace", envDur(getenv, "BOXWIRE_RECYCLE_GRACE", 5*time.Minute), "how long a sandbox past its max lifetime waits for its running turn or tool call before it is replaced anyway")
	fs.DurationVar(&o.reapInterval, "reap-interval", envDur(getenv, "BOXWIRE_REAP_INTERVAL", 0), "how often to look for expired sandboxes (default: min(30s, idle-ttl/4))")
	fs.Int64Var(&o.limits.PidsLimit, "pids-limit", int64(envInt(getenv, "BOXWIRE_PIDS_LIMIT", 512)), "processes per sandbox")
	fs.Int64Var(&o.limits.MemoryBytes, "memory", int64(envInt(getenv, "BOXWIRE_MEMORY_BYTES", 2<<30)), "memory limit per sandbox in bytes")
	cpus := fs.Float64("cpus", envFloat(getenv, "BOXWIRE_CPUS", 1), "CPUs per sandbox")
	fs.Int64Var(&o.limits.TmpfsBytes, "tmpfs", int64(envInt(getenv, "BOXWIRE_TMPFS_BYTES", 256<<20)), "size of /tmp per sandbox in bytes")
	fs.Int64Var(&o.maxUpload, "max-upload", int64(envInt(getenv, "BOXWIRE_MAX_UPLOAD_BYTES", 0)), "largest file upload request in bytes (0: 8 GiB)")
	fs.StringVar(&o.policy, "policy", getenv("BOXWIRE_POLICY"), "approval policy JSON file (docs/approvals.md)")
	egressThreadMax := fs.String("egress-thread-max", getenv("BOXWIRE_EGRESS_THREAD_MAX"), "comma-separated egress rules a thread's own rules must fall within (empty: threads may ask for none)")
	fs.DurationVar(&o.retention.MaxAge, "retain-age", envDur(getenv, "BOXWIRE_RETAIN_AGE", 0), "delete a thread and its log this long after its newest event, unless live (0: keep)")
	fs.IntVar(&o.retention.MaxEvents, "retain-events", envInt(getenv, "BOXWIRE_RETAIN_EVENTS", 0), "keep at most this many newest events per thread (0: all)")
	fs.Int64Var(&o.retention.MaxBytes, "retain-bytes", int64(envInt(getenv, "BOXWIRE_RETAIN_BYTES", 0)), "keep about this many bytes of newest events per thread (0: all)")
	fs.DurationVar(&o.storeSync, "store-sync", envDur(getenv, "BOXWIRE_STORE_SYNC", 100*time.Millisecond), "fsync the event store at most this often; 0: before every event is sent (slower; survives power loss)")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", envDur(getenv, "BOXWIRE_LEASE_TTL", 0), "how long this bridge's leases in the store (its id, its threads) last unrenewed (default 15s)")
	fs.StringVar(&o.advertiseURL, "advertise-url", getenv("BOXWIRE_ADVERTISE_URL"), "where the other bridges on a shared store reach this one, e.g. http://10.0.0.5:7420 (default: the listen address, when it names a host)")
	fs.StringVar(&o.store, "store", getenv("BOXWIRE_STORE"), "where threads, events, users and audit are kept: a postgres:// URL, or the bbolt file (default: <data-dir>/boxwire.db)")
	fs.IntVar(&o.logOutputCap, "log-output-cap", envInt(getenv, "BOXWIRE_LOG_OUTPUT_CAP", 0), "tool_output bytes of one call kept in the log; the rest stays in the sandbox's output file (0: 256 KiB)")
	fs.BoolVar(&o.init, "init", getenv("BOXWIRE_INIT") == "1", "run the engine's init as PID 1 (for images without one)")
	fs.StringVar(&o.previewDomain, "preview-domain", getenv("BOXWIRE_PREVIEW_DOMAIN"), "serve sandbox ports at {port}-{thread}.DOMAIN too (a wildcard DNS name for the bridge; docs/preview.md); empty: the path form only")
	allowedHosts := fs.String("allowed-hosts", getenv("BOXWIRE_ALLOWED_HOSTS"), "comma-separated host names clients may reach the bridge by, besides IP addresses and localhost (* for any; others get 421, against DNS rebinding)")
	fs.StringVar(&o.oidc.Issuer, "oidc-issuer", getenv("BOXWIRE_OIDC_ISSUER"), "also accept bearer JWTs of this OpenID Connect issuer (its JWKS is fetched and cached)")
	fs.StringVar(&o.oidc.Audience, "oidc-audience", getenv("BOXWIRE_OIDC_AUDIENCE"), "the audience (aud) the issuer's tokens must name")
	fs.StringVar(&o.oidc.Claim, "oidc-claim", env("BOXWIRE_OIDC_CLAIM", "sub"), "the token claim that names the user")
	fs.BoolVar(&o.oidc.CreateUsers, "oidc-create-users", getenv("BOXWIRE_OIDC_CREATE_USERS") == "1", "create a user on first use of a valid token naming an unknown one")
	fs.StringVar(&o.oidcLogin.ClientID, "oidc-client-id", getenv("BOXWIRE_OIDC_CLIENT_ID"), "the web page's client at --oidc-issuer: the page offers Sign in with OIDC (code flow with PKCE); --oidc-audience defaults to it")
	fs.StringVar(&o.oidcLogin.ClientSecret, "oidc-client-secret", getenv("BOXWIRE_OIDC_CLIENT_SECRET"), "the secret of --oidc-client-id (none for a public client); prefer the environment variable")
	fs.StringVar(&o.oidcLogin.RedirectURL, "oidc-redirect-url", getenv("BOXWIRE_OIDC_REDIRECT_URL"), "the sign-in callback registered at the provider (default: <scheme>://<host>/v1/login/oidc/callback of the request)")
	fs.Int64Var(&o.userLimits.TokensPerDay, "user-tokens-per-day", int64(envInt(getenv, "BOXWIRE_USER_TOKENS_PER_DAY", 0)), "model tokens one user's sandboxes (not an admin's) may use a UTC day, unless the user has a limit of their own (0: no limit)")
	fs.IntVar(&o.userLimits.Sandboxes, "user-max-sandboxes", envInt(getenv, "BOXWIRE_USER_MAX_SANDBOXES", 0), "sandboxes one user (not an admin) may run at a time, unless the user has a limit of their own (0: no limit)")
	fs.IntVar(&o.rollout.Batch, "rollout-batch", envInt(getenv, "BOXWIRE_ROLLOUT_BATCH", 0), "after a rebuild of their image, move at most this many idle live sandboxes per --rollout-interval (0: all at once); the warm pool refills at once")
	fs.DurationVar(&o.rollout.Interval, "rollout-interval", envDur(getenv, "BOXWIRE_ROLLOUT_INTERVAL", fleet.DefaultRolloutInterval), "pause between two batches of --rollout-batch")
	fs.BoolVar(&o.rollout.Paused, "rollout-paused", getenv("BOXWIRE_ROLLOUT_PAUSED") == "1", "start with the rollout paused (POST /v1/rollout resumes it)")
	fs.StringVar(&o.imagesFile, "images-file", getenv("BOXWIRE_IMAGES_FILE"), "file of images a thread may choose besides --image and --images, one a line (# comments); re-read on SIGHUP")
	fs.StringVar(&o.agentBinary, "agent-binary", getenv("BOXWIRE_AGENT_BINARY"), "host agent binary mounted read-only over the image's in new sandboxes (a static build of ./agent; no image rebuild)")
	fs.StringVar(&o.tlsCert, "tls-cert", getenv("BOXWIRE_TLS_CERT"), "serve HTTPS with this certificate (PEM; with --tls-key)")
	fs.StringVar(&o.tlsKey, "tls-key", getenv("BOXWIRE_TLS_KEY"), "the private key of --tls-cert (PEM)")
	fs.BoolVar(&o.insecureHTTP, "insecure-http", getenv("BOXWIRE_INSECURE_HTTP") == "1", "serve the web page and its login over plain HTTP on a non-loopback address too (without it they need TLS there)")
	o.engineFlags(fs, getenv) // options_engine.go
	wsSize := fs.String("workspace-size", env("BOXWIRE_WORKSPACE_SIZE", "10GiB"), "size cap of each /workspace, e.g. 10GiB (a sparse ext4 image on a loop device; needs root on the engine's host); 0: uncapped")
	o.hostToolsFlags(fs, getenv) // options_hosttools.go
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.oidcLogin.ClientID != "" {
		if o.oidc.Issuer == "" {
			return o, errors.New("--oidc-client-id needs --oidc-issuer")
		}
		if o.oidc.Audience == "" {
			o.oidc.Audience = o.oidcLogin.ClientID
		}
		o.oidcLogin.Issuer = o.oidc.Issuer
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return o, errors.New("--tls-cert and --tls-key go together")
	}
	if err := o.checkEngine(); err != nil {
		return o, err
	}
	var err error
	if o.workspaceSize, err = sandbox.ParseSize(*wsSize); err != nil {
		return o, fmt.Errorf("--workspace-size: %w", err)
	}
	if o.workspaceSize > 0 && o.workspaceSize < sandbox.MinWorkspaceBytes {
		return o, fmt.Errorf("--workspace-size %s: want 0 (uncapped) or at least %d MiB", *wsSize, sandbox.MinWorkspaceBytes>>20)
	}
	o.images, o.runtimes = splitList(*images), splitList(*runtimes)
	o.allowedHosts = splitList(*allowedHosts)
	o.egressThreadMax = splitList(*egressThreadMax)
	o.limits.NanoCPUs = int64(*cpus * 1e9)
	if err := o.checkStore(); err != nil {
		return o, err
	}
	if o.rollout.Batch < 0 || o.rollout.Interval < 0 {
		return o, errors.New("--rollout-batch and --rollout-interval must not be negative")
	}
	if o.agentBinary != "" {
		abs, err := filepath.Abs(o.agentBinary)
		if err != nil {
			return o, fmt.Errorf("--agent-binary: %w", err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.Mode().IsRegular() {
			return o, fmt.Errorf("--agent-binary %s: not a regular file (%v)", o.agentBinary, err)
		}
		o.agentBinary = abs
	}
	return o, nil
}

// allowedImages are --images and the lines of --images-file, read now
// (again on SIGHUP, server.Config.ReloadImages).
func (o options) allowedImages() ([]string, error) {
	images := slices.Clone(o.images)
	if o.imagesFile == "" {
		return images, nil
	}
	raw, err := os.ReadFile(o.imagesFile)
	if err != nil {
		return nil, fmt.Errorf("--images-file: %w", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line != "" && !slices.Contains(images, line) {
			images = append(images, line)
		}
	}
	return images, nil
}

// connect makes the sandbox manager and checks that the engine answers
// and, with a workspace cap, that the host can make capped workspaces.
func (o options) connect(ctx context.Context, getenv func(string) string, log *slog.Logger) (*sandbox.Docker, error) {
	dcfg, err := o.docker(getenv, log)
	if err != nil {
		return nil, err
	}
	mgr, err := sandbox.Connect(ctx, dcfg)
	if errors.Is(err, sandbox.ErrWorkspaceUnsupported) {
		return nil, fmt.Errorf("--workspace-size (%d bytes) needs loop devices, mkfs.ext4, debugfs and losetup, as root on the engine's host (or set --workspace-size 0 for an uncapped workspace): %w", o.workspaceSize, err)
	}
	return mgr, err
}

// server is the server's configuration: the options, the environment's
// security settings (security.go) and the approval policy (approvals.go).
func (o options) server(mgr sandbox.Manager, getenv func(string) string, log *slog.Logger) (server.Config, error) {
	cfg := server.Config{
		Token: o.token, Image: o.image, DataDir: o.dataDir, Manager: mgr, Engine: o.engine, Model: o.model, BridgeID: o.id,
		LLM:    llmproxy.Config{Upstream: envOr(getenv, "OPENAI_BASE_URL", "https://api.openai.com/v1"), APIKey: getenv("OPENAI_API_KEY")},
		Logger: log, Software: "boxwire-bridge/" + version,
		Images: o.images, Runtime: o.runtime, Runtimes: o.runtimes, MaxSandboxes: o.maxSandboxes, Pool: o.pool, PoolIdle: o.poolIdle,
		IdleTTL: o.idleTTL, MaxLifetime: o.maxLifetime, ReapInterval: o.reapInterval,
		ThreadTTL: o.threadTTL, RecycleGrace: o.recycleGrace,
		MaxUploadBytes: o.maxUpload, AllowedHosts: o.allowedHosts, UserLimits: o.userLimits, PreviewDomain: o.previewDomain,
		Retention: o.retention, MaxStoredOutput: o.logOutputCap, StoreSync: o.storeSync, StoreURL: o.store, LeaseTTL: o.leaseTTL, AdvertiseURL: o.advertiseURL,
		EgressThreadMax: o.egressThreadMax, // docs/egress-thread.md
		Rollout:         o.rollout, AgentBinary: o.agentBinary, ReloadImages: o.allowedImages,
		TLSCert: o.tlsCert, TLSKey: o.tlsKey, InsecureHTTP: o.insecureHTTP, // docs/web.md
	}
	var err error
	if cfg.Images, err = o.allowedImages(); err != nil {
		return cfg, err
	}
	if err := applySecurity(&cfg, getenv); err != nil {
		return cfg, err
	}
	if o.oidc.Issuer != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		v, err := auth.NewOIDCVerifier(ctx, o.oidc)
		if err != nil {
			return cfg, fmt.Errorf("--oidc-issuer: %w", err)
		}
		cfg.OIDC = v
		if o.oidcLogin.ClientID != "" {
			l := o.oidcLogin
			cfg.OIDCLogin = &l
		}
	}
	if err := applyApprovals(&cfg, o.policy, getenv); err != nil {
		return cfg, err
	}
	return cfg, o.applyHostTools(&cfg, getenv, log) // options_hosttools.go
}

// docker is the sandbox manager's configuration.
func (o options) docker(getenv func(string) string, log *slog.Logger) (sandbox.DockerConfig, error) {
	cfg := sandbox.DockerConfig{Host: getenv("DOCKER_HOST"), Logger: log.With("component", "sandbox"),
		Defaults: o.limits, Runtime: o.runtime, Init: o.init,
		Workspace: sandbox.WorkspaceConfig{Dir: filepath.Join(o.dataDir, "workspaces"), Bytes: o.workspaceSize}}
	switch o.seccomp {
	case "builtin", "":
		p, err := sandbox.SeccompProfile()
		if err != nil {
			return cfg, err
		}
		cfg.SeccompProfile = p
	case "engine":
	default:
		raw, err := os.ReadFile(o.seccomp)
		if err != nil {
			return cfg, fmt.Errorf("seccomp profile: %w", err)
		}
		cfg.SeccompProfile = string(raw)
	}
	return cfg, nil
}

func (o options) check() error {
	if o.token == "" {
		return errors.New("a token is required: --token or BOXWIRE_TOKEN")
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

func envInt(getenv func(string) string, key string, def int) int {
	if v, err := strconv.Atoi(getenv(key)); err == nil {
		return v
	}
	return def
}

func envFloat(getenv func(string) string, key string, def float64) float64 {
	if v, err := strconv.ParseFloat(getenv(key), 64); err == nil {
		return v
	}
	return def
}

func envDur(getenv func(string) string, key string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(getenv(key)); err == nil {
		return v
	}
	return def
}

// checkStore checks --store: a postgres:// URL (bridge/store/pgstore),
// kept as server.Config.StoreURL, or the bbolt file, which must be the
// one the server opens, <data-dir>/boxwire.db (then o.store is "").
func (o *options) checkStore() error {
	switch {
	case o.store == "":
		return nil
	case pgstore.IsURL(o.store):
		if _, err := pgxpool.ParseConfig(o.store); err != nil {
			return fmt.Errorf("--store: %w", err) // pgx leaves the password out
		}
		return nil
	}
	if want := filepath.Join(o.dataDir, server.StoreFile); filepath.Clean(o.store) != filepath.Clean(want) {
		return fmt.Errorf("--store %s: the store file is <data-dir>/%s (%s); set --data-dir to move it", o.store, server.StoreFile, want)
	}
	o.store = ""
	return nil
}
