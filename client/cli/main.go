package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/term"
	"golang.org/x/sys/unix"
)

// Program is one run of the client as its process sees it: the arguments
// after the program name, the environment, the standard files and Ctrl-C.
type Program struct {
	Args []string
	// Getenv reads the environment (os.Getenv); nil means an empty one.
	Getenv func(string) string
	// Stdin, Stdout and Stderr are the process's standard files; whether
	// each is a terminal picks colours, the line editor and progress bars.
	Stdin, Stdout, Stderr *os.File
	// Interrupts delivers Ctrl-C (SIGINT); may be nil.
	Interrupts <-chan os.Signal
}

// invocation is what a sub-command gets: the program, where to connect,
// and the chat's options built from the flags.
type invocation struct {
	p        Program
	chat     chat.Config
	opts     Options
	progress io.Writer // stderr when it is a terminal: progress bars
}

// Main parses p's flags, reads the environment and the config file, and
// runs the sub-command the arguments name (commands.go) or else the chat
// (Run): interactive, or one turn with -m. It returns the process's exit
// code (ExitOK, ExitTurnFailed, ExitUsage, ExitInterrupted) and blocks
// until the work ends or ctx does.
func Main(ctx context.Context, p Program) int {
	if p.Getenv == nil {
		p.Getenv = func(string) string { return "" }
	}
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	fs.SetOutput(p.Stderr)
	fs.Usage = func() { fmt.Fprintln(p.Stderr, usage()); fs.PrintDefaults() }
	url := fs.String("url", "", "bridge or agent URL: ws(s)://host:port/v1/ws, http(s)://host:port, host:port or unix:/path (default $BOXWIRE_URL, the config file, then "+chat.DefaultURL+")")
	token := fs.String("token", "", "bearer token (default $BOXWIRE_TOKEN, then the config file)")
	config := fs.String("config", "", "config file (default $BOXWIRE_CONFIG, then "+DefaultConfigPath()+")")
	thread := fs.String("thread", "", "thread to attach to (default: a new one)")
	message := fs.String("m", "", "send this message, print the turn and exit")
	jsonOut := fs.Bool("json", false, "print every message from the server as a JSON line")
	autoApprove := fs.Bool("auto-approve", false, "approve every approval request without asking (scripts only)")
	autoDeny := fs.Bool("auto-deny", false, "deny every approval request without asking")
	seed := fs.String("seed", "", "upload this local file or folder into the workspace before the first turn")
	verbose := fs.Bool("v", false, "log connection details to stderr")
	var create createFlags
	create.register(fs)
	if err := fs.Parse(p.Args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	oneShot := false
	fs.Visit(func(f *flag.Flag) { oneShot = oneShot || f.Name == "m" })
	cmd, known := lookupCommand(fs.Arg(0))
	if (fs.NArg() > 0 && !known) || (oneShot && *message == "") {
		fmt.Fprintln(p.Stderr, usage())
		return ExitUsage
	}
	cfgPath, required := firstSet(*config, p.Getenv("BOXWIRE_CONFIG")), true
	if cfgPath == "" {
		cfgPath, required = DefaultConfigPath(), false
	}
	file, err := LoadConfig(cfgPath, required)
	if err != nil {
		fmt.Fprintln(p.Stderr, "boxwire:", err)
		return ExitUsage
	}
	cfg := chat.Config{
		URL:    firstSet(*url, p.Getenv("BOXWIRE_URL"), file.URL),
		Token:  firstSet(*token, p.Getenv("BOXWIRE_TOKEN"), file.Token),
		Thread: *thread,
	}
	if cfg.Create, err = create.request(); err != nil {
		fmt.Fprintln(p.Stderr, "boxwire:", err)
		return ExitUsage
	}
	moveTo := ""
	if cfg.Create != nil && cfg.Thread != "" {
		if moveTo = create.moveImage(); moveTo == "" {
			fmt.Fprintln(p.Stderr, "boxwire: --thread attaches to an existing thread; the new-thread flags (--runtime, --assistant, --ttl, --egress, --policy) cannot apply to it (--image alone moves it to that image)")
			return ExitUsage
		}
		cfg.Create = nil
	}
	var logOut io.Writer = io.Discard
	if *verbose {
		logOut = p.Stderr
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if moveTo != "" {
		if code := moveThread(ctx, p.Stderr, cfg, moveTo); code != ExitOK {
			return code
		}
	}

	inv := &invocation{p: p, chat: cfg}
	if isTerminal(p.Stderr) {
		inv.progress = p.Stderr
	}
	inv.opts = Options{
		Chat: cfg, Message: *message, Seed: *seed, JSON: *jsonOut, Approvals: approvalMode(*autoApprove, *autoDeny),
		In: p.Stdin, Out: p.Stdout, Err: p.Stderr, Progress: inv.progress,
		Color:       isTerminal(p.Stdout) && p.Getenv("NO_COLOR") == "" && !*jsonOut,
		Interrupts:  p.Interrupts,
		Editor:      isTerminal(p.Stdin) && isTerminal(p.Stdout) && p.Getenv("TERM") != "dumb",
		HistoryFile: DefaultHistoryPath(),
	}
	inv.opts.Shell = func(ctx context.Context, thread string, args []string) int {
		return term.FromChat(ctx, inv.termOptions(), thread, args)
	}
	if known {
		return cmd.run(ctx, inv, fs.Args()[1:])
	}
	return Run(ctx, inv.opts)
}

// moveWait bounds how long moveThread waits for the thread's sandbox to
// come back on the new image; moveCheck is how often it looks.
const (
	moveWait  = 2 * time.Minute
	moveCheck = 250 * time.Millisecond
)

// moveThread moves cfg's thread to image through the bridge
// (PATCH /v1/threads/{id} {"image"}), saying so on w, and waits until the
// thread's sandbox runs again on a new container whose agent has greeted
// the bridge, so the chat that follows is not sent to the one being
// replaced. A busy thread moves
// only when its work ends: after moveWait it attaches anyway. A
// suspended thread resumes on the new image; nothing to wait for.
func moveThread(ctx context.Context, w io.Writer, cfg chat.Config, image string) int {
	before, err := chat.GetThread(ctx, cfg, cfg.Thread)
	if err != nil {
		fmt.Fprintln(w, "boxwire:", err)
		return ExitUsage
	}
	info, err := chat.SetImage(ctx, cfg, cfg.Thread, image)
	if err != nil {
		fmt.Fprintln(w, "boxwire:", err)
		return ExitUsage
	}
	fmt.Fprintf(w, "boxwire: thread %s moves to image %s (workspace and conversation kept)\n", info.ID, info.Image)
	if before.Status != wire.SandboxRunning || before.Image == image {
		return ExitOK
	}
	ctx, cancel := context.WithTimeout(ctx, moveWait)
	defer cancel()
	tick := time.NewTicker(moveCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(w, "boxwire: the thread's sandbox has not moved yet (a busy thread moves when its work ends); attaching")
			return ExitOK
		case <-tick.C:
		}
		now, err := chat.GetThread(ctx, cfg, cfg.Thread)
		// The new container runs and its agent has answered the bridge
		// (its build is known): a message now reaches it.
		if err == nil && now.Status == wire.SandboxRunning && now.SandboxID != "" && now.SandboxID != before.SandboxID &&
			now.AgentVersion != "" {
			return ExitOK
		}
	}
}

// termOptions are the options of a terminal in the sandbox (client/term).
func (inv *invocation) termOptions() term.Options {
	return term.Options{Chat: inv.chat, In: inv.p.Stdin, Out: inv.p.Stdout, Err: inv.p.Stderr, TTY: inv.p.Stdin}
}

func firstSet(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func isTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
