// Package config is the bridge server's configuration: Config, every
// setting bridge/server.New takes (bridge's main fills it from flags and
// the environment), its defaults and its checks (Checked), and how it is
// logged (LogValue: without the token or the key). bridge/server.Config is
// this Config. It holds no state and starts nothing; it never imports the
// server.
package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/boxdir"
	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/hosttools"
	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/policy"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/threadlog"
	"github.com/boxwire/boxwire/bridge/web"
)

// Config configures the bridge server (bridge/server.New, Run). Zero
// values of optional fields mean their defaults, which Checked fills.
type Config struct {
	// Token is the bearer token clients must present. Required.
	Token string
	// Image is the sandbox image. Required.
	Image string
	// DataDir holds the bridge's state; sockets go under <DataDir>/run.
	// Required.
	DataDir string
	// Manager creates and removes sandboxes. Required; the server does not
	// close it.
	Manager sandbox.Manager
	// Engine names what Manager drives, for GET /metrics ("docker" or
	// "kubernetes"); default "docker".
	Engine string
	// LLM configures each thread's LLM proxy (its Logger is replaced by the
	// thread's logger).
	LLM llmproxy.Config
	// Model is passed to the agent as BOXWIRE_MODEL when set.
	Model string
	// SandboxUID and SandboxGID own each socket folder and run the
	// sandbox; default 1000.
	SandboxUID, SandboxGID int
	// BridgeID is the boxwire.owner label on this bridge's sandboxes;
	// default the host name.
	BridgeID string
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// Software names this build in hello, e.g. "boxwire-bridge/0.1.0".
	Software string
	// MaxUploadBytes caps one file upload request (bridge/files); default
	// files.DefaultMaxUploadBytes.
	MaxUploadBytes int64
	// AllowedHosts are the host names (besides IP addresses and
	// localhost) that clients may name in their Host header; "*" allows
	// any. Others get 421 (bridge/hostcheck), which keeps DNS-rebound pages
	// out.
	AllowedHosts []string
	// OIDC, when set, also accepts bearer JWTs of an identity provider
	// (auth.NewOIDCVerifier); users are the ones its claim names.
	OIDC *auth.OIDCVerifier
	// UserLimits are the limits of users who have none of their own
	// (sandboxes at a time); zero means no limit. Admins have none.
	UserLimits auth.Limits
	// SessionTTL is how long a browser login lasts (bridge/web); default
	// web.DefaultSessionTTL.
	SessionTTL time.Duration
	// InsecureHTTP lets the page and its login be served over plain HTTP
	// beyond loopback (bridge/web).
	InsecureHTTP bool
	// TLSCert and TLSKey, both set, make Run serve HTTPS with that
	// certificate and key (PEM files).
	TLSCert, TLSKey string
	// OIDCLogin, when set, lets the page sign in with the OIDC provider
	// (bridge/web); OIDC must accept its ID tokens.
	OIDCLogin *web.OIDCLogin

	// HostTools, when set, are the operator's host tools (bridge/hosttools,
	// docs/tools.md) the threads' agents may call; the server closes it.
	HostTools *hosttools.Host

	// PreviewDomain turns on preview URLs of the host form,
	// {port}-{thread}.{PreviewDomain} (bridge/preview); empty leaves the
	// path form only.
	PreviewDomain string

	// Images are the images a thread may ask for besides Image.
	Images []string
	// Runtime is the OCI runtime of sandboxes ("" = the engine's default);
	// Runtimes are the others a thread may ask for (e.g. "runsc").
	Runtime  string
	Runtimes []string
	// MaxSandboxes bounds the live sandboxes; 0 means no bound.
	MaxSandboxes int
	// IdleTTL removes a sandbox nobody has used (no client attached, no
	// traffic) for this long; default fleet.DefaultIdleTTL.
	IdleTTL time.Duration
	// MaxLifetime removes a sandbox this long after its creation, in use
	// or not; default fleet.DefaultMaxLifetime.
	MaxLifetime time.Duration
	// ThreadTTL removes a suspended thread (no sandbox: idle TTL) with its
	// log and workspace volume this long after it was suspended; default
	// fleet.DefaultThreadTTL. DELETE removes one at once.
	ThreadTTL time.Duration
	// RecycleGrace is how long a sandbox past its maximum lifetime waits
	// for its running turns and run_tool calls to end before it is
	// replaced anyway; default fleet.DefaultRecycleGrace.
	RecycleGrace time.Duration
	// ReapInterval is how often the reaper looks for expired sandboxes;
	// default the smaller of 30s and IdleTTL/4.
	ReapInterval time.Duration
	// Rollout paces how live sandboxes move to a rebuilt image; Reload
	// and ReloadImages reload Images (bridge/rollout); AgentBinary is a
	// host agent binary mounted into new sandboxes (fleet.Config).
	Rollout      fleet.RolloutConfig
	Reload       <-chan os.Signal
	ReloadImages func() ([]string, error)
	AgentBinary  string
	// StoreURL is where the bridge keeps threads, events, users, leases
	// and approvals (bridge/server.OpenStore): "" for the bbolt file
	// <DataDir>/boxwire.db, or a postgres:// URL (docs/store.md).
	StoreURL string
	// Store keeps thread records; default the store above (bridge/recordstore over it).
	Store fleet.Records
	// Retention bounds the event log in the store file (bridge/store);
	// zero fields keep everything. Pruning runs every RetentionInterval
	// (default 10m).
	Retention         store.Retention
	RetentionInterval time.Duration
	// MaxStoredOutput caps the tool_output bytes of one call kept in the
	// log; default threadlog.DefaultMaxStoredOutput.
	MaxStoredOutput int
	// StoreSync is the store's fsync interval (store.Options.SyncInterval):
	// zero fsyncs every commit before its events are sent.
	StoreSync time.Duration
	// LeaseTTL is how long this bridge's leases in the store (its own id,
	// its threads) last unrenewed; default bridge/server.DefaultLeaseTTL.
	LeaseTTL time.Duration
	// AdvertiseURL is where the other bridges on the store reach this one
	// to forward it the clients of its threads (bridge/internal/wsrelay); default the
	// address Run listens on, when that names a host.
	AdvertiseURL string

	// Egress is the egress allowlist (see egress.ParseRules); empty means
	// sandboxes get no egress proxy and so no network at all.
	Egress []string
	// EgressThreadMax caps the egress rules a thread may ask for
	// (wire.CreateThread.Egress): each must fall within one of these rules
	// (egress.Rule.Within). Empty, the default, refuses every thread's
	// request; set, every sandbox gets an egress proxy (bridge/fleet egress.go).
	EgressThreadMax []string
	// Posture is what each agent's hello must report; nil checks nothing.
	Posture *fleet.PosturePolicy
	// UsageEvents publishes a usage event to a sandbox's threads after
	// every model call its LLM proxy forwarded.
	UsageEvents bool

	// Policy decides which tool calls, egress hosts and credential uses
	// are allowed, denied or asked about, and holds the host-held
	// credentials (docs/approvals.md); nil allows every tool call and
	// leaves egress to the allowlist. A thread may put rules of its own
	// in front (wire.CreateThread.Policy).
	Policy *policy.Policy
	// EgressRoots verifies the real hosts behind TLS the egress proxy
	// terminates to add a credential; nil means the system's roots.
	EgressRoots *x509.CertPool

	// Pool is how many started, greeted sandboxes the warm pool keeps per
	// image for new thread-scope threads (docs/pool.md); 0 turns it off.
	// PoolIdle (default fleet.DefaultPoolIdle) empties an image's pool nobody
	// took from for that long, until a thread asks for the image again.
	Pool     int
	PoolIdle time.Duration
}

// LogValue logs the configuration without the token or the key.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("image", c.Image), slog.String("data_dir", c.DataDir),
		slog.Any("llm", c.LLM), slog.String("model", c.Model),
		slog.String("bridge_id", c.BridgeID), slog.String("software", c.Software),
		slog.Any("images", c.Images), slog.String("runtime", c.Runtime), slog.Any("runtimes", c.Runtimes),
		slog.Int("max_sandboxes", c.MaxSandboxes), slog.Duration("idle_ttl", c.IdleTTL),
		slog.Duration("max_lifetime", c.MaxLifetime),
	)
}

// DefaultRetentionInterval is how often retention runs by default
// (Config.RetentionInterval).
const DefaultRetentionInterval = 10 * time.Minute

// Checked checks c's required fields, its LLM proxy's settings and its
// egress rules, and returns it with the defaults filled: sandbox uid and
// gid 1000, the host name as BridgeID, a discarding Logger, Software, one
// HTTP client for every sandbox's LLM proxy, MaxStoredOutput,
// RetentionInterval and ThreadTTL (the fleet fills its other lifecycle
// fields itself, fleet.Config). Its errors start with "server: ".
func (c Config) Checked() (Config, error) {
	switch {
	case c.Token == "":
		return c, errors.New("server: token is required")
	case c.Image == "":
		return c, errors.New("server: image is required")
	case c.DataDir == "":
		return c, errors.New("server: data dir is required")
	case c.Manager == nil:
		return c, errors.New("server: sandbox manager is required")
	}
	if _, err := llmproxy.New(c.LLM); err != nil {
		return c, fmt.Errorf("server: %w", err)
	}
	if _, err := egress.ParseRules(c.Egress); err != nil {
		return c, fmt.Errorf("server: %w", err)
	}
	if _, err := egress.ParseRules(c.EgressThreadMax); err != nil {
		return c, fmt.Errorf("server: thread egress cap: %w", err)
	}
	if c.SandboxUID == 0 {
		c.SandboxUID = 1000
	}
	if c.SandboxGID == 0 {
		c.SandboxGID = 1000
	}
	if c.BridgeID == "" {
		host, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("server: bridge id: %w", err)
		}
		c.BridgeID = host
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Software == "" {
		c.Software = "boxwire-bridge/dev"
	}
	if c.Engine == "" {
		c.Engine = "docker"
	}
	if c.LLM.HTTPClient == nil { // one for every sandbox's proxy
		c.LLM.HTTPClient = llmproxy.NewHTTPClient()
	}
	if c.MaxStoredOutput <= 0 {
		c.MaxStoredOutput = threadlog.DefaultMaxStoredOutput
	}
	if c.RetentionInterval <= 0 {
		c.RetentionInterval = DefaultRetentionInterval
	}
	if c.ThreadTTL <= 0 { // the one lifecycle field the server reads itself (a suspended thread's expiry)
		c.ThreadTTL = fleet.DefaultThreadTTL
	}
	return c, nil
}

// mountsFolders says whether m mounts the sandboxes' host folders into
// them (Docker). A manager that says it does not (kube.Kube, whose pods
// have folders of their own) gets private agent folders, which need no
// tmpfs and so no CAP_SYS_ADMIN (boxdir.Config.Private).
func mountsFolders(m sandbox.Manager) bool {
	fm, ok := m.(interface{ MountsHostFolders() bool })
	return !ok || fm.MountsHostFolders()
}

// Fleet is c's part of the fleet's config (bridge/fleet): the sandboxes,
// their images, limits, lifetimes, pool, rollout, proxies and egress,
// with the socket folders' layout under DataDir. The server adds its
// hooks and Records.
func (c Config) Fleet() fleet.Config {
	return fleet.Config{
		Manager: c.Manager, Records: c.Store, Logger: c.Logger,
		Layout:   boxdir.New(boxdir.Config{Root: c.DataDir, UID: c.SandboxUID, GID: c.SandboxGID, Private: !mountsFolders(c.Manager)}),
		BridgeID: c.BridgeID, Token: c.Token, Software: c.Software, Model: c.Model,
		SandboxUID: c.SandboxUID, SandboxGID: c.SandboxGID, DataDir: c.DataDir,
		Image: c.Image, Images: c.Images, Runtime: c.Runtime, Runtimes: c.Runtimes,
		MaxSandboxes: c.MaxSandboxes, IdleTTL: c.IdleTTL, MaxLifetime: c.MaxLifetime,
		ThreadTTL: c.ThreadTTL, RecycleGrace: c.RecycleGrace, ReapInterval: c.ReapInterval,
		Pool: c.Pool, PoolIdle: c.PoolIdle, Rollout: c.Rollout, AgentBinary: c.AgentBinary,
		LLM: c.LLM, UsageEvents: c.UsageEvents,
		Egress: c.Egress, EgressThreadMax: c.EgressThreadMax, Policy: c.Policy, EgressRoots: c.EgressRoots,
		Posture: c.Posture,
	}
}
