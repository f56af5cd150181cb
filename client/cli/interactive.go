package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/boxwire/boxwire/bridge/wire"
)

// prompt is shown when the client waits for a line.
const prompt = "› "

// maxLine is the longest input line accepted.
const maxLine = wire.MaxMessageBytes / 2

// interactive prints the thread, then reads lines and plays each as a turn,
// rendering events that arrive between turns (history replayed after
// hello, other clients' turns) as they come.
func (s *session) interactive(ctx context.Context) int {
	fmt.Fprintf(s.o.Out, "thread %s\n", s.conn.Thread())
	lines := make(chan string)
	quit := make(chan struct{})
	defer close(quit)
	// This goroutine ends when In reaches EOF or fails, or at the next line
	// after Run returns; Run does not wait for it, because a read from a
	// terminal cannot be cancelled.
	go readLines(s.o.In, lines, quit)

	showPrompt := true
	for {
		if showPrompt {
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
			if strings.TrimSpace(line) == "" {
				continue
			}
			if code, fatal := s.turn(ctx, line); fatal {
				return code
			}
		case env, ok := <-s.conn.Events():
			if !ok {
				s.r.EndLine()
				fmt.Fprintf(s.o.Err, "boxwire: connection lost: %v\n", s.conn.Err())
				return ExitUsage
			}
			s.r.Render(env)
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
