package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// startEditor starts the line editor when asked for and In and Out are
// terminals; Out, Err and Progress then write through it. It returns nil
// (and leaves plain input) otherwise or when the terminal refuses.
func (s *session) startEditor() *editor {
	in, okIn := s.o.In.(*os.File)
	out, okOut := s.o.Out.(*os.File)
	if !s.o.Editor || s.o.JSON || s.o.Message != "" || !okIn || !okOut {
		return nil
	}
	ed, err := newEditor(in, out, promptStyle(s.o.Color), s.o.HistoryFile)
	if err != nil {
		fmt.Fprintf(s.o.Err, "boxwire: %v (reading plain lines)\n", err)
		return nil
	}
	s.ed = ed
	s.o.Out, s.o.Err = ed, ed
	if s.o.Progress != nil {
		s.o.Progress = ed
	}
	return ed
}

// promptStyle is the editor's prompt, bold on a color terminal.
func promptStyle(color bool) string {
	if color {
		return "\x1b[1m" + prompt + "\x1b[0m"
	}
	return prompt
}

// width is the terminal's width for the renderer; 0 when unknown.
func (s *session) width() int {
	if s.ed == nil {
		return 0
	}
	return s.ed.Width()
}

// track updates the status line's state from an event: token usage from
// turn_done (a standalone agent) or the bridge's usage events (which win),
// and the sandbox's state.
func (s *session) track(env wire.Envelope) {
	switch env.Type {
	case wire.TypeTurnDone:
		var d wire.TurnDone
		if !s.bridgeUse && env.Decode(&d) == nil && d.Usage != nil {
			s.usage += d.Usage.TotalTokens
		}
	case wire.TypeUsage:
		var u wire.UsageReport
		if env.Decode(&u) == nil {
			s.bridgeUse = true
			s.usage, s.requests, s.budget = u.Total.TotalTokens, u.Requests, u.TokenBudget
		}
	case wire.TypeSandboxExited:
		var e wire.SandboxExited
		s.sandbox = wire.SandboxExitedStatus
		if env.Decode(&e) == nil && e.Reason != "" {
			s.sandbox += " (" + string(e.Reason) + ")"
		}
	case wire.TypeSandboxReplaced:
		s.sandbox = "replaced"
	}
}

// statusLine is "thread t_1 · sandbox running · 1234 tokens in 3 calls".
func (s *session) statusLine() string {
	c := s.current()
	parts := []string{"thread " + c.Thread()}
	if c.Server().Role == wire.RoleAgent {
		parts[0] = "agent " + c.Server().Software
	} else {
		parts = append(parts, "sandbox "+s.sandbox)
	}
	tokens := fmt.Sprintf("%d tokens", s.usage)
	if s.budget > 0 {
		tokens = fmt.Sprintf("%d/%d tokens", s.usage, s.budget)
	}
	if s.requests > 0 {
		tokens += fmt.Sprintf(" in %d calls", s.requests)
	}
	return strings.Join(append(parts, tokens), " · ")
}

// statusTimeout bounds asking the bridge about the thread for /status.
const statusTimeout = 5 * time.Second

// statusReport is /status: the status line and, on a bridge, a second line
// with what the thread's sandbox runs: "agent 0.2.0 (sha256:1f2e3d4c5b6a) ·
// image boxwire:latest (sha256:9a8b7c6d5e4f)". A bridge that does not
// answer leaves the second line out.
func (s *session) statusReport(ctx context.Context) string {
	line := s.statusLine()
	c := s.current()
	if c.Server().Role == wire.RoleAgent {
		return line
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	info, err := chat.GetThread(ctx, s.o.Chat, c.Thread())
	if err != nil {
		return line
	}
	return line + "\n" + runsLine(info)
}

// runsLine says which agent build and image a thread's sandbox runs.
func runsLine(info wire.ThreadInfo) string {
	agent := "agent " + cmp.Or(info.AgentVersion, "unknown")
	if info.AgentHash != "" {
		agent += " (" + shortHash(info.AgentHash) + ")"
	}
	img := "image " + info.Image
	if info.ImageID != "" {
		img += " (" + shortHash(info.ImageID) + ")"
	}
	return agent + " · " + img
}

// shortHash shortens "sha256:<hex>" to its first 12 hex digits.
func shortHash(h string) string {
	algo, hex, ok := strings.Cut(h, ":")
	if ok && len(hex) > 12 {
		return algo + ":" + hex[:12]
	}
	return h
}

// status prints the status line after a turn on a terminal.
func (s *session) status() {
	if s.o.JSON || !s.o.Color {
		return
	}
	s.r.Printf("─ %s", s.statusLine())
}

// listThreads prints the bridge's threads as a table; the current one is
// marked with *.
func (s *session) listThreads(ctx context.Context) {
	body, err := chat.ListThreads(ctx, s.o.Chat)
	if err != nil {
		fmt.Fprintf(s.o.Err, "boxwire: %v\n", err)
		return
	}
	var list wire.ThreadList
	if err := json.Unmarshal(body, &list); err != nil {
		fmt.Fprintf(s.o.Err, "boxwire: threads: %v\n", err)
		return
	}
	if len(list.Threads) == 0 {
		s.r.Printf("no threads")
		return
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  THREAD\tSANDBOX\tIMAGE\tCLIENTS\tAGE\tIDLE EXPIRES")
	now := time.Now()
	for _, t := range list.Threads {
		mark := " "
		if t.ID == s.current().Thread() {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%d\t%s\t%s\n", mark, t.ID, t.Status, t.Image, t.Clients,
			ago(now.Sub(t.Created)), "in "+ago(t.IdleExpires.Sub(now)))
	}
	tw.Flush()
	s.r.EndLine()
	fmt.Fprint(s.o.Out, b.String())
}

// ago renders a duration coarsely: 45s, 12m, 3h, 2d.
func ago(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// expand shows the whole output of tool call n (the last when args is
// empty) from the events the renderer kept, or, when it was cut and the
// agent saved it, from its output file in the workspace.
func (s *session) expand(ctx context.Context, args []string) {
	n := s.r.Calls()
	if len(args) > 0 {
		if _, err := fmt.Sscan(args[0], &n); err != nil {
			s.r.Printf("usage: /expand [N]")
			return
		}
	}
	rec, ok := s.r.Call(n)
	if !ok {
		s.r.Printf("no tool call %d (calls so far: %d)", n, s.r.Calls())
		return
	}
	out := rec.Output
	if res := rec.Result; res != nil && res.Truncated && res.OutputPath != "" && (rec.Capped || int64(len(out)) < res.TotalBytes) {
		if full, err := s.fetch(ctx, res.OutputPath); err == nil {
			out = full
		} else {
			s.r.Printf("(showing what was kept: %v)", err)
		}
	}
	title := fmt.Sprintf("#%d %s(%s)", rec.N, rec.Name, rec.Summary)
	if err := s.r.ShowOutput(title, out); err != nil {
		fmt.Fprintf(s.o.Err, "boxwire: write output: %v\n", err)
	}
}

// fetch reads a workspace file through the files API.
func (s *session) fetch(ctx context.Context, path string) (string, error) {
	ft := chat.FileTransfer{Thread: s.current().Thread(), Path: path}
	if s.current().Server().Role == wire.RoleAgent {
		ft.Thread = ""
	}
	d, err := chat.OpenDownload(ctx, s.o.Chat, ft, true)
	if err != nil {
		return "", err
	}
	defer d.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, io.LimitReader(d.Body, 64<<20)); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return b.String(), nil
}
