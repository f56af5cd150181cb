package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// prompt is shown when the client waits for a line.
const prompt = "› "

// maxLine is the longest input line accepted.
const maxLine = wire.MaxMessageBytes / 2

// help lists the chat commands.
const help = `commands:
  /new                 start a new thread (and sandbox)
  /attach ID           attach to thread ID
  /delete ID           delete thread ID and its sandbox
  /threads             list the bridge's threads
  /export [FILE]       write this session's events as JSON lines (default: stdout)
  /upload LOCAL [DIR]  copy a local file or folder into the workspace folder DIR
  /download PATH [DIR] copy a workspace file or folder into the local folder DIR
  /expand [N]          show the whole output of tool call N (default: the last)
  /status              show the thread, its sandbox and the tokens used
  /egress [RULE...]    show or replace the sandbox's own egress rules (--clear removes them)
  /approve [ID]        approve approval request ID (default: the newest open one)
  /deny [ID] [REASON]  deny approval request ID (default: the newest open one)
  /shell [SID]         open a terminal in the sandbox, or attach to session SID (Ctrl-] q comes back)
  /help                this text
Ctrl-C interrupts a turn; at the prompt Ctrl-C twice or Ctrl-D leaves.`

// interactive prints the thread, then reads lines and plays each as a turn
// or a command, rendering events that arrive between turns (history
// replayed after hello, other clients' turns) as they come.
func (s *session) interactive(ctx context.Context) int {
	if !s.o.JSON {
		fmt.Fprintf(s.o.Out, "thread %s\n", s.current().Thread())
		s.status()
	}
	lines, stop := s.startInput()
	defer stop()
	s.lines = lines // approval.go reads y/N answers from them

	asked := false // a prompt is up, waiting for a line
	armed := false // Ctrl-C at the prompt: the next one leaves
	for {
		if !asked && !s.o.JSON {
			if err := s.ask(); err != nil {
				fmt.Fprintf(s.o.Err, "boxwire: write output: %v\n", err)
				return ExitUsage
			}
			asked = true
		}
		select {
		case line, ok := <-lines:
			if !ok { // Ctrl-D
				s.r.EndLine()
				return ExitOK
			}
			asked, armed = false, false
			s.r.LineEntered()
			s.r.SetFold(s.ed != nil)
			if code, quit := s.play(ctx, strings.TrimSpace(line)); quit {
				return code
			}
		case env, ok := <-s.current().Events():
			if !ok {
				if ctx.Err() == nil && s.reconnect(ctx) {
					continue
				}
				s.r.EndLine()
				fmt.Fprintf(s.o.Err, "boxwire: connection lost: %v\n", s.current().Err())
				return ExitUsage
			}
			s.show(env, false)
			if s.ed == nil && (env.Type == wire.TypeTurnDone || env.Type == wire.TypeError || !wire.Known(env.Type)) {
				asked = false // the plain prompt scrolled away: show it again
			}
		case <-s.o.Interrupts:
			if s.ed == nil || armed {
				s.r.EndLine()
				return ExitInterrupted
			}
			armed = true
			s.ed.ClearLine()
			s.r.Printf("(Ctrl-C again or Ctrl-D to leave)")
		case <-ctx.Done():
			s.r.EndLine()
			return ExitInterrupted
		}
	}
}

// startInput starts reading lines: from the editor, or plain lines of In.
// stop ends the plain reader at its next line: Run does not wait for it,
// because a read from a pipe or file cannot be cancelled.
func (s *session) startInput() (<-chan string, func()) {
	if s.ed != nil {
		return s.ed.Lines(), func() {}
	}
	lines := make(chan string)
	quit := make(chan struct{})
	go readLines(s.o.In, lines, quit)
	return lines, func() { close(quit) }
}

// ask shows the prompt: the editor's, or the renderer's for plain input.
func (s *session) ask() error {
	if s.ed == nil {
		return s.r.Prompt(prompt)
	}
	err := s.r.EndLine()
	s.r.SetFold(false) // others' output may arrive above the prompt
	s.ed.Ask()
	return err
}

// play runs one entered line: a command or a turn.
func (s *session) play(ctx context.Context, line string) (code int, quit bool) {
	switch {
	case line == "":
		return 0, false
	case strings.HasPrefix(line, "/"):
		return s.command(ctx, line)
	default:
		return s.turn(ctx, line)
	}
}

// command runs one slash command; quit says Run must return code.
func (s *session) command(ctx context.Context, line string) (code int, quit bool) {
	fields := strings.Fields(line)
	cmd, args := fields[0], fields[1:]
	switch cmd {
	case "/help", "/?":
		s.r.Printf("%s", help)
	case "/quit", "/exit":
		return ExitOK, true
	case "/new", "/attach":
		cfg := s.o.Chat
		cfg.Thread, cfg.AfterSeq = "", 0
		if cmd == "/attach" {
			if len(args) != 1 {
				s.r.Printf("usage: /attach ID")
				return 0, false
			}
			cfg.Thread = args[0]
		}
		c, code := dial(ctx, s.o, cfg)
		if c == nil {
			return code, false // dial printed why; stay on the old thread
		}
		s.setConn(c)
		s.transcript, s.usage, s.requests, s.budget, s.bridgeUse = nil, 0, 0, 0, false
		s.asked = nil // the old thread's requests
		s.sandbox = wire.SandboxRunning
		s.r.Printf("thread %s", c.Thread())
	case "/delete":
		if len(args) != 1 {
			s.r.Printf("usage: /delete ID")
			return 0, false
		}
		if err := chat.DeleteThread(ctx, s.o.Chat, args[0]); err != nil {
			fmt.Fprintf(s.o.Err, "boxwire: %v\n", err)
		} else {
			s.r.Printf("deleted %s", args[0])
		}
	case "/threads":
		s.listThreads(ctx)
	case "/shell":
		if s.o.Shell == nil || s.o.JSON {
			s.r.Printf("/shell needs an interactive terminal")
			return 0, false
		}
		s.r.EndLine()
		if s.ed != nil {
			_ = s.ed.Suspend()
			defer s.ed.Resume()
		}
		s.o.Shell(ctx, s.current().Thread(), args)
	case "/export":
		s.export(ctx, args)
	case "/upload", "/download":
		s.transferCommand(ctx, cmd, args)
	case "/expand":
		s.expand(ctx, args)
	case "/status":
		s.r.Printf("%s", s.statusReport(ctx)) // status.go
	case "/approve", "/deny":
		s.answerCommand(cmd, args, "") // approval.go
	case "/egress":
		s.egressCommand(ctx, args) // egress.go
	default:
		s.r.Printf("unknown command %s (try /help)", cmd)
	}
	return 0, false
}

// export writes the thread's events as JSON lines to args[0] or Out: the
// bridge's whole stored log when it has the export endpoint, else the
// events this session saw.
func (s *session) export(ctx context.Context, args []string) {
	var w io.Writer = s.o.Out
	if len(args) > 0 {
		f, err := os.Create(args[0])
		if err != nil {
			fmt.Fprintf(s.o.Err, "boxwire: export: %v\n", err)
			return
		}
		defer f.Close()
		w = f
	}
	s.r.EndLine()
	if c := s.current(); c.Server().Role != wire.RoleAgent {
		n, err := chat.ExportEvents(ctx, s.o.Chat, c.Thread(), 0, w)
		if err == nil {
			if len(args) > 0 {
				s.r.Printf("exported the thread's log (%d bytes) to %s", n, args[0])
			}
			return
		}
		if n > 0 {
			fmt.Fprintf(s.o.Err, "boxwire: %v\n", err)
			return
		}
	}
	for _, env := range s.transcript {
		data, err := wire.Marshal(env)
		if err == nil {
			fmt.Fprintf(w, "%s\n", data)
		}
	}
	if len(args) > 0 {
		s.r.Printf("exported %d events seen by this session to %s", len(s.transcript), args[0])
	}
}

// readLines sends each line of in to lines and closes lines at EOF, on a
// read error, or when quit is closed.
func readLines(in io.Reader, lines chan<- string, quit <-chan struct{}) {
	defer close(lines)
	if in == nil {
		return
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	for sc.Scan() {
		select {
		case lines <- sc.Text():
		case <-quit:
			return
		}
	}
}
