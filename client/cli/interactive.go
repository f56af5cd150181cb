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
  /help                this text
Ctrl-C interrupts a turn; at the prompt Ctrl-C or Ctrl-D leaves.`

// interactive prints the thread, then reads lines and plays each as a turn
// or a command, rendering events that arrive between turns (history
// replayed after hello, other clients' turns) as they come.
func (s *session) interactive(ctx context.Context) int {
	if !s.o.JSON {
		fmt.Fprintf(s.o.Out, "thread %s\n", s.current().Thread())
	}
	lines := make(chan string)
	quit := make(chan struct{})
	defer close(quit)
	// This goroutine ends when In reaches EOF or fails, or at the next line
	// after Run returns; Run does not wait for it, because a read from a
	// terminal cannot be cancelled.
	go readLines(s.o.In, lines, quit)

	showPrompt := true
	for {
		if showPrompt && !s.o.JSON {
			if err := s.r.Prompt(prompt); err != nil {
				fmt.Fprintf(s.o.Err, "boxwire: write output: %v\n", err)
				return ExitUsage
			}
			showPrompt = false
		}
		select {
		case line, ok := <-lines:
			if !ok { // Ctrl-D
				s.r.EndLine()
				return ExitOK
			}
			showPrompt = true
			s.r.LineEntered()
			line = strings.TrimSpace(line)
			switch {
			case line == "":
			case strings.HasPrefix(line, "/"):
				if code, quit := s.command(ctx, line); quit {
					return code
				}
			default:
				if code, fatal := s.turn(ctx, line); fatal {
					return code
				}
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
			showPrompt = env.Type == wire.TypeTurnDone || env.Type == wire.TypeError || !wire.Known(env.Type)
		case <-s.o.Interrupts:
			s.r.EndLine()
			return ExitInterrupted
		case <-ctx.Done():
			s.r.EndLine()
			return ExitInterrupted
		}
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
		s.transcript, s.usage = nil, 0
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
	case "/export":
		s.export(args)
	case "/upload", "/download":
		s.transferCommand(ctx, cmd, args)
	default:
		s.r.Printf("unknown command %s (try /help)", cmd)
	}
	return 0, false
}

// listThreads prints the bridge's GET /v1/threads answer.
func (s *session) listThreads(ctx context.Context) {
	body, err := chat.ListThreads(ctx, s.o.Chat)
	if err != nil {
		fmt.Fprintf(s.o.Err, "boxwire: %v\n", err)
		return
	}
	s.r.Printf("%s", strings.TrimSpace(string(body)))
}

// export writes the transcript as JSON lines to args[0] or Out.
func (s *session) export(args []string) {
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
	for _, env := range s.transcript {
		data, err := wire.Marshal(env)
		if err == nil {
			fmt.Fprintf(w, "%s\n", data)
		}
	}
	if len(args) > 0 {
		s.r.Printf("exported %d events to %s", len(s.transcript), args[0])
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
