package term

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
)

// Usage is the `client shell` synopsis.
const Usage = `usage: client [flags] shell [--thread ID] [--session SID] [-- COMMAND...]   open or attach a terminal
       client [flags] shell --list [--thread ID]                              list the thread's terminals
` + KeysHelp + `; the session keeps running after a detach.`

// Main is the `client shell` command: args are what follows "shell". It
// parses them over o (--thread sets o.Chat.Thread), follows SIGWINCH when
// o.TTY is a terminal, and runs Run or List. It returns the exit code.
func Main(ctx context.Context, o Options, args []string) int {
	fs := flag.NewFlagSet("shell", flag.ContinueOnError)
	fs.SetOutput(o.Err)
	fs.Usage = func() { fmt.Fprintln(o.Err, Usage); fs.PrintDefaults() }
	thread := fs.String("thread", o.Chat.Thread, "thread whose sandbox runs the terminal (default: a new thread)")
	session := fs.String("session", o.Session, "session to attach to (default: open a new one)")
	list := fs.Bool("list", false, "list the thread's terminal sessions and exit")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return ExitOK
		}
		return ExitUsage
	}
	o.Chat.Thread, o.Session = *thread, *session
	if fs.NArg() > 0 {
		if o.Session != "" {
			fmt.Fprintln(o.Err, "boxwire: a command needs a new session; drop --session")
			return ExitUsage
		}
		o.Command = fs.Args()
	}
	if *list {
		return List(ctx, o)
	}
	if o.TTY != nil && IsTerminal(o.TTY) && o.Resizes == nil {
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		o.Resizes = winch
	}
	return Run(ctx, o)
}

// List prints the sessions of o.Chat.Thread (or a standalone agent) as a
// table on o.Out and returns the exit code.
func List(ctx context.Context, o Options) int {
	conn, err := dial(ctx, o, nil)
	if err != nil {
		fmt.Fprintf(o.Err, "boxwire: %v\n", err)
		return ExitUsage
	}
	defer conn.Close()
	lctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	sessions, err := conn.List(lctx)
	if err != nil {
		fmt.Fprintf(o.Err, "boxwire: %v\n", err)
		return ExitUsage
	}
	fmt.Fprintf(o.Out, "thread %s\n", conn.Thread())
	tw := tabwriter.NewWriter(o.Out, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSIZE\tWATCHERS\tSTATE\tCOMMAND")
	for _, s := range sessions {
		state := "running"
		if s.Exited {
			state = "exited"
			if s.ExitCode != nil {
				state = fmt.Sprintf("exited %d", *s.ExitCode)
			}
		}
		fmt.Fprintf(tw, "%s\t%dx%d\t%d\t%s\t%s\n", s.Session, s.Cols, s.Rows, s.Watchers, state, strings.Join(s.Command, " "))
	}
	_ = tw.Flush()
	return ExitOK
}

// FromChat is the chat's /shell ARGS on thread: no argument opens a new
// session, a session id attaches to it, and flags are those of Main. The
// chat's line reader loses no keystroke when o.In is the terminal (an
// *os.File): Run stops reading it before it returns (Options.In).
func FromChat(ctx context.Context, o Options, thread string, args []string) int {
	if len(args) == 1 && !strings.HasPrefix(args[0], "-") {
		args = []string{"--session", args[0]}
	}
	return Main(ctx, o, append([]string{"--thread", thread}, args...))
}
