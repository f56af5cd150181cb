package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/boxwire/boxwire/client/chat"
	"github.com/boxwire/boxwire/client/cli"
	"github.com/boxwire/boxwire/client/term"
	"golang.org/x/sys/unix"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage: client [flags]                       interactive chat
       client [flags] -m "text"            one turn, then exit
       client [flags] cp LOCAL THREAD:PATH  copy into a thread's workspace folder (":PATH" for an agent)
       client [flags] cp THREAD:PATH LOCAL  copy out of it into a local folder
       client [flags] shell [--thread ID] [--session SID] [--list] [-- CMD...]  a terminal in the sandbox (Ctrl-] q detaches)
       client [flags] whoami               who the bridge says the token (or API key) is
exit codes: 0 ok, 1 turn failed or some files failed, 2 usage or connection error, 130 interrupted`

// run parses flags, the environment and the config file, wires signals,
// and calls the cli.
func run(args []string, stdin *os.File, stdout, stderr *os.File) int {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, usage); fs.PrintDefaults() }
	url := fs.String("url", "", "bridge or agent URL: ws(s)://host:port/v1/ws, http(s)://host:port, host:port or unix:/path (default $BOXWIRE_URL, the config file, then "+chat.DefaultURL+")")
	token := fs.String("token", "", "bearer token (default $BOXWIRE_TOKEN, then the config file)")
	config := fs.String("config", "", "config file (default $BOXWIRE_CONFIG, then "+cli.DefaultConfigPath()+")")
	thread := fs.String("thread", "", "thread to attach to (default: a new one)")
	message := fs.String("m", "", "send this message, print the turn and exit")
	jsonOut := fs.Bool("json", false, "print every message from the server as a JSON line")
	autoApprove := fs.Bool("auto-approve", false, "approve every approval request without asking (scripts only)")
	autoDeny := fs.Bool("auto-deny", false, "deny every approval request without asking")
	seed := fs.String("seed", "", "upload this local file or folder into the workspace before the first turn")
	verbose := fs.Bool("v", false, "log connection details to stderr")
	var create createFlags
	create.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	oneShot := false
	fs.Visit(func(f *flag.Flag) { oneShot = oneShot || f.Name == "m" })
	sub := fs.Arg(0)
	if (fs.NArg() > 0 && sub != "cp" && sub != "shell" && sub != "whoami") || (oneShot && *message == "") {
		fmt.Fprintln(stderr, usage)
		return cli.ExitUsage
	}
	cfgPath, required := firstSet(*config, os.Getenv("BOXWIRE_CONFIG")), true
	if cfgPath == "" {
		cfgPath, required = cli.DefaultConfigPath(), false
	}
	file, err := cli.LoadConfig(cfgPath, required)
	if err != nil {
		fmt.Fprintln(stderr, "boxwire:", err)
		return cli.ExitUsage
	}
	cfg := chat.Config{
		URL:    firstSet(*url, os.Getenv("BOXWIRE_URL"), file.URL),
		Token:  firstSet(*token, os.Getenv("BOXWIRE_TOKEN"), file.Token),
		Thread: *thread,
	}
	if cfg.Create, err = create.request(); err != nil {
		fmt.Fprintln(stderr, "boxwire:", err)
		return cli.ExitUsage
	}
	if cfg.Create != nil && cfg.Thread != "" {
		fmt.Fprintln(stderr, "boxwire: --thread attaches to an existing thread; the new-thread flags (--image, --runtime, --assistant, --ttl, --egress, --policy) cannot apply to it")
		return cli.ExitUsage
	}
	var logOut io.Writer = io.Discard
	if *verbose {
		logOut = stderr
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelDebug}))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)

	var progress io.Writer
	if isTerminal(stderr) {
		progress = stderr
	}
	o := cli.Options{
		Chat: cfg, Message: *message, Seed: *seed, JSON: *jsonOut, Approvals: approvalMode(*autoApprove, *autoDeny),
		In: stdin, Out: stdout, Err: stderr, Progress: progress,
		Color:       isTerminal(stdout) && os.Getenv("NO_COLOR") == "" && !*jsonOut,
		Interrupts:  interrupts,
		Editor:      isTerminal(stdin) && isTerminal(stdout) && os.Getenv("TERM") != "dumb",
		HistoryFile: cli.DefaultHistoryPath(),
	}
	o.Shell = func(ctx context.Context, thread string, args []string) int {
		return term.FromChat(ctx, term.Options{Chat: cfg, In: stdin, Out: stdout, Err: stderr, TTY: stdin}, thread, args)
	}
	switch sub {
	case "whoami":
		id, err := chat.WhoAmI(ctx, cfg)
		if err != nil {
			fmt.Fprintln(stderr, "boxwire:", err)
			return cli.ExitUsage
		}
		fmt.Fprintf(stdout, "%s (admin: %v, via %s", id.User, id.Admin, id.Via)
		if id.KeyID != "" {
			fmt.Fprintf(stdout, ", key %s", id.KeyID)
		}
		fmt.Fprintf(stdout, "); sandboxes %d", id.Usage.Sandboxes)
		if id.Limits.Sandboxes > 0 {
			fmt.Fprintf(stdout, " of %d", id.Limits.Sandboxes)
		}
		fmt.Fprintln(stdout)
		return cli.ExitOK
	case "shell":
		return term.Main(ctx, term.Options{Chat: cfg, In: stdin, Out: stdout, Err: stderr, TTY: stdin}, fs.Args()[1:])
	case "cp":
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { // ends with cctx, at the latest when run returns
			select {
			case <-interrupts:
				cancel()
			case <-cctx.Done():
			}
		}()
		return cli.Copy(cctx, o, fs.Args()[1:], progress)
	}
	return cli.Run(ctx, o)
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
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
