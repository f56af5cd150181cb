// Package cli is the boxwire agent's command: its flags and environment
// (options.go), the secrets it keeps from commands (secrets.go), and Run,
// which puts the agent's packages together and serves until its context
// ends. cmd main (agent/main.go) only wires the process to Main.
package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/boxwire/boxwire/agent/codepages"
	"github.com/boxwire/boxwire/agent/files"
	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/posture"
	"github.com/boxwire/boxwire/agent/relay"
	"github.com/boxwire/boxwire/agent/session"
	"github.com/boxwire/boxwire/agent/terminal"
	"github.com/boxwire/boxwire/agent/threads"
	"github.com/boxwire/boxwire/agent/tools"
)

// threadReserve is how many OS threads the agent starts at once (package
// threads): more than it ever blocks in system calls at a time (commands
// are awaited in the poller, at most tools.MaxBlockingCalls file tools run
// at once), so a command that uses up the sandbox's pids limit cannot make
// the runtime fail to start one.
const threadReserve = 32

// portsInterval is how often the agent looks for listening ports.
const portsInterval = time.Second

// Main runs the agent command with args (without the program name):
// "relay" as the first argument is the bridge's channel into a pod
// (agent/relay), anything else the agent itself (Run). version names the
// build.
func Main(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout io.WriteCloser, stderr io.Writer, version string) error {
	if len(args) > 0 && args[0] == "relay" {
		return relay.Main(ctx, args[1:], stdin, stdout, stderr)
	}
	return Run(ctx, args, getenv, stdout, stderr, version)
}

// Run parses flags (defaults from getenv, options.go), then serves until
// ctx ends.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, version string) error {
	if err := hideFromCommands(); err != nil { // secrets.go: before any secret is read
		return err
	}
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	software := "boxwire-agent/" + version
	if o.showVersion {
		fmt.Fprintln(stdout, software)
		return nil
	}
	if !strings.HasPrefix(o.listen, "unix:") && o.token == "" {
		return fmt.Errorf("listening on TCP %s needs a token: set --token or BOXWIRE_TOKEN", o.listen)
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	// Which binary serves, in every hello (selfhash.go): hashed beside the
	// rest of the start (the thread reserve, the posture, the listen) and
	// the bridge's first dial, not before them.
	hash := startSelfHash(log)
	// The thread reserve, before a command can use up the pids limit: made
	// once the hash is done, beside the rest of the start. A sandbox has
	// one CPU (GOMAXPROCS 1), where the two slowed each other, and the
	// first hello waits for the hash, not for the reserve: only a request
	// that can start a process does (session.Config.Started).
	reserved := make(chan struct{})
	go func() {
		defer close(reserved)
		hash()
		threads.Reserve(threadReserve)
		if n, err := threads.Count(); err == nil {
			log.Info("threads reserved", "threads", n)
		}
		releaseCode(log, "start")
	}()

	apiKey, err := secret(getenv, "OPENAI_API_KEY")
	if err != nil {
		return err
	}
	llm := loop.OpenAIConfig{BaseURL: getenv("OPENAI_BASE_URL"), APIKey: apiKey, Model: o.model}
	tok := &llmToken{log: log} // this sandbox's proxy token, not a model key (llmtoken.go)
	if o.llmSocket != "" {
		// The bridge hands the token over in its claim; older bridges set
		// BOXWIRE_LLM_TOKEN.
		tok.set(getenv("BOXWIRE_LLM_TOKEN"))
		llm.HTTPClient = tok.client(loop.UnixSocketClient(o.llmSocket))
	}
	egressEnv, stopEgress, err := startEgress(ctx, getenv("BOXWIRE_EGRESS_SOCKET"), log)
	if err != nil {
		return err
	}
	defer stopEgress()
	egressEnv, err = trustEnv(egressEnv, getenv("BOXWIRE_CA_CERT")) // approvals: the bridge's egress CA
	if err != nil {
		return err
	}
	makeHome(getenv("HOME"), o.workspace, log)
	pos := posture.Read()
	log.Info("posture", "posture", pos)
	toolCfg := o.tools // the limits; the rest is filled in here
	toolCfg.Workspace, toolCfg.Logger, toolCfg.Env = o.workspace, log, egressEnv
	toolSet := tools.New(toolCfg)
	defer toolSet.Close() // kills background jobs after the server stopped
	mcpServers := imageMCP(getenv, o.workspace, egressEnv, o.tools.OutputLimit, log)
	defer mcpServers.Close()
	srv := session.New(session.Config{
		Loop: loop.Config{
			Model: loop.NewOpenAI(llm), Tools: toolSet.All(), Workspace: o.workspace,
			MaxSteps: o.loop.MaxSteps, Budget: o.loop.Budget,
			TurnTools: mcpServers.Tools, // the image's MCP servers (imagemcp.go); the session adds the bridge's host tools
		},
		Token:     o.token,
		Software:  software,
		AgentHash: hash,
		Started:   reserved,
		// The greeting is the last of a sandbox's start: what it ran
		// once goes too (the release after the reserve may come before
		// the bridge's hello).
		Greeted: func() {
			<-reserved
			releaseCode(log, "first hello")
		},
		Logger:   log,
		Posture:  &pos,
		Claim:    tok.set,
		Terminal: terminal.Config{IdleTimeout: o.termIdle, Env: egressEnv}, // terminals get the egress proxy too
		Files:    files.New(files.Config{Workspace: o.workspace, MaxFileBytes: o.maxFileBytes, Logger: log}),
		// Ports: what listens in the sandbox, looked at every second (ports event).
		PortsInterval: portsInterval,
	})
	srv.ThreadMCP(mcpServers.ForThread) // the MCP servers a thread declares, beside the image's
	ln, err := session.Listen(o.listen)
	if err != nil {
		return err
	}
	log.Info("agent listening", "addr", o.listen, "version", version, "workspace", o.workspace, "llm", llm, "llm_socket", o.llmSocket,
		"max_steps", o.loop.MaxSteps, "context_budget", o.loop.Budget, "output_limit", o.tools.OutputLimit)
	err = srv.Run(ctx, ln)
	log.Info("agent stopped", "err", err)
	return err
}

// makeHome creates HOME when it lies in the workspace (the image's
// /workspace/.home) and this workspace has none yet, so that it is writable
// and kept with the workspace.
func makeHome(home, workspace string, log *slog.Logger) {
	home, workspace = filepath.Clean(home), filepath.Clean(workspace)
	if !filepath.IsAbs(home) || !strings.HasPrefix(home, workspace+string(filepath.Separator)) {
		return
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		log.Warn("create HOME", "home", home, "err", err)
	}
}

// releaseCode gives back the mappings of the code the agent's start ran
// once (package codepages): done when the start is behind (after), and
// again after the first hello; what runs later maps back in.
func releaseCode(log *slog.Logger, after string) {
	n, err := codepages.Release()
	if err != nil {
		log.Warn("release start-up code pages", "after", after, "err", err)
		return
	}
	log.Info("start-up code pages released", "after", after, "bytes", n)
}
