package mcpclient

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Session is one initialized MCP session: the command client's
// (DialCommand) or another client's behind an adapter (the bridge's SDK
// sessions, bridge/hosttools). Its methods are safe for concurrent use;
// a Conn compares sessions with ==, so an implementation is a pointer.
type Session interface {
	// ListTools lists every tool of the server, following its pages. It
	// blocks until the server answered or ctx ends.
	ListTools(ctx context.Context) ([]Tool, error)
	// CallTool calls a tool and blocks until its result, the session's
	// end (an error that is Ended) or ctx's end, which cancels the call
	// on the server.
	CallTool(ctx context.Context, p CallParams) (*CallToolResult, error)
	// Wait blocks until the session has ended (the server exited or hung
	// up, or Close) and says why.
	Wait() error
	// Close ends the session and releases what it holds (a stdio
	// server's stdin is closed, then it is signalled). It is idempotent.
	Close() error
}

// ErrEnded is what a call's error is (errors.Is) when its session ended
// before the answer: the server exited or hung up, or the session was
// closed.
var ErrEnded = errors.New("the MCP session ended")

// Ended reports whether a call's err says its session ended.
func Ended(err error) bool { return errors.Is(err, ErrEnded) }

// Tool is one tool a server lists (tools/list).
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// CallParams are a tools/call request's.
type CallParams struct {
	Name string
	// Arguments are the tool's arguments: a JSON object (a map, a struct
	// or a json.RawMessage of one); nil sends none.
	Arguments any
	// ProgressToken, when not empty, asks the server for progress
	// notifications of the call under this token.
	ProgressToken string
}

// CallToolResult is a tool's result (tools/call).
type CallToolResult struct {
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
}

// Content is one item of a result's content: its Type says which fields
// it has ("text": Text; "image", "audio": MIMEType and Data; "resource_link":
// URI; "resource": Resource).
type Content struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	MIMEType string    `json:"mimeType,omitempty"`
	Data     string    `json:"data,omitempty"` // base64
	URI      string    `json:"uri,omitempty"`
	Resource *Resource `json:"resource,omitempty"`
}

// Resource is an embedded resource's contents.
type Resource struct {
	URI  string `json:"uri"`
	Text string `json:"text,omitempty"`
}

// Text is a tool result's text contents, one per line (images, audio and
// links named, an embedded resource's text or URI), or its structured
// content as JSON when it sent no text.
func Text(res *CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		switch c.Type {
		case "text":
			b.WriteString(c.Text)
		case "image", "audio":
			fmt.Fprintf(&b, "[%s %s, %d bytes]", c.Type, c.MIMEType, decodedLen(c.Data))
		case "resource_link":
			fmt.Fprintf(&b, "[resource %s]", c.URI)
		case "resource":
			if c.Resource != nil && c.Resource.Text != "" {
				b.WriteString(c.Resource.Text)
			} else if c.Resource != nil {
				fmt.Fprintf(&b, "[resource %s]", c.Resource.URI)
			}
		}
	}
	if b.Len() == 0 && len(res.StructuredContent) > 0 && string(res.StructuredContent) != "null" {
		var compact bytes.Buffer
		if json.Compact(&compact, res.StructuredContent) == nil {
			b.Write(compact.Bytes())
		}
	}
	return b.String()
}

// decodedLen is how many bytes the base64 data s holds.
func decodedLen(s string) int {
	return base64.StdEncoding.DecodedLen(len(s)) - strings.Count(s[max(0, len(s)-2):], "=")
}

// emptySchema is the input schema of a tool that has none that is a JSON
// object.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// Schema is t's input schema, or the empty object schema when it has
// none that is a JSON object.
func Schema(t Tool) json.RawMessage {
	var probe map[string]any
	if json.Unmarshal(t.InputSchema, &probe) != nil || probe == nil {
		return emptySchema
	}
	return t.InputSchema
}
