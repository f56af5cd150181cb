// Command mcptool is a tiny MCP server for boxwire's tests, written with
// the official Go SDK: the bridge runs it as a host tool (stdio, or
// streamable HTTP with --http), and a test image declares it as an MCP
// server inside the sandbox. Its tools:
//
//   - echo {text}: answers the text, after a progress message (and a
//     pause, so that the client takes it before the result);
//   - canary: answers the value of $MCPTOOL_CANARY (the secret the
//     operator gave it), which the bridge must redact;
//   - hang: appends "started" to $MCPTOOL_CANCEL_FILE, waits until the
//     call is cancelled, then appends "cancelled";
//   - crash: exits at once with status 3;
//   - fail: answers a tool error;
//   - env: answers the names of its environment variables;
//   - grow (with --grow only): adds the tool "grown", so that the server
//     sends notifications/tools/list_changed.
//
// With --http ADDR it serves streamable HTTP on ADDR and requires
// "Authorization: Bearer $MCPTOOL_HTTP_TOKEN". --page-size N lists at
// most N tools a page (tools/list's cursors).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	httpAddr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	name := flag.String("name", "mcptool", "the server's name")
	pageSize := flag.Int("page-size", 0, "list at most this many tools a page (0: the SDK's default)")
	grow := flag.Bool("grow", false, "offer the tool grow")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := newServer(*name, &mcp.ServerOptions{PageSize: *pageSize})
	if *grow {
		addGrow(srv)
	}
	if err := run(ctx, srv, *httpAddr); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "mcptool:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, srv *mcp.Server, httpAddr string) error {
	if httpAddr == "" {
		return srv.Run(ctx, &mcp.StdioTransport{})
	}
	token := os.Getenv("MCPTOOL_HTTP_TOKEN")
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := &http.Server{Addr: httpAddr, ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token == "" || r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})}
	go func() { <-ctx.Done(); _ = hs.Close() }()
	if err := hs.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type echoArgs struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type none struct{}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func newServer(name string, opts *mcp.ServerOptions) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: name, Version: "0.1.0"}, opts)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo the text back."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Message: "echoing", Progress: 1, Total: 1})
				// A client handles notifications apart from responses: give it
				// time to take the progress before the result ends the call.
				time.Sleep(300 * time.Millisecond)
			}
			return text("echo: " + in.Text), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "canary", Description: "Tell the secret this server was given."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return text("the secret is " + os.Getenv("MCPTOOL_CANARY")), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "hang", Description: "Wait until cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			note("started")
			<-ctx.Done()
			note("cancelled")
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "crash", Description: "Exit at once."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "mcptool: crashing on purpose")
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Answer a tool error."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("fail: this tool always fails")
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "env", Description: "Name the environment variables this server has."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			var names []string
			for _, kv := range os.Environ() {
				k, _, _ := strings.Cut(kv, "=")
				names = append(names, k)
			}
			sort.Strings(names)
			return text(strings.Join(names, " ")), nil, nil
		})
	return srv
}

// addGrow adds the tool grow, which adds the tool grown.
func addGrow(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{Name: "grow", Description: "Add the tool grown."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(srv, &mcp.Tool{Name: "grown", Description: "Added by grow."},
				func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
					return text("grown"), nil, nil
				})
			return text("added grown"), nil, nil
		})
}

// note appends word to $MCPTOOL_CANCEL_FILE, if set.
func note(word string) {
	f := os.Getenv("MCPTOOL_CANCEL_FILE")
	if f == "" {
		return
	}
	if fh, err := os.OpenFile(f, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
		fmt.Fprintln(fh, word)
		fh.Close()
	}
}
