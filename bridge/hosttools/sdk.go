package hosttools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/boxwire/boxwire/internal/mcpclient"
)

// sdkSession is a session of the official MCP Go SDK's client, which the
// bridge uses for its servers (stdio and streamable HTTP), as an
// mcpclient.Session.
type sdkSession struct{ cs *mcp.ClientSession }

// ListTools lists every tool, following the pages.
func (s *sdkSession) ListTools(ctx context.Context) ([]mcpclient.Tool, error) {
	var out []mcpclient.Tool
	for t, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, sdkErr(err)
		}
		schema, _ := json.Marshal(t.InputSchema) // mcpclient.Schema checks it
		out = append(out, mcpclient.Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out, nil
}

// CallTool calls a tool; ctx ending sends notifications/cancelled.
func (s *sdkSession) CallTool(ctx context.Context, p mcpclient.CallParams) (*mcpclient.CallToolResult, error) {
	params := &mcp.CallToolParams{Name: p.Name, Arguments: p.Arguments}
	if p.ProgressToken != "" {
		params.SetProgressToken(p.ProgressToken)
	}
	res, err := s.cs.CallTool(ctx, params)
	if err != nil {
		return nil, sdkErr(err)
	}
	// The SDK's result as it is on the wire, read as mcpclient's.
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("the tool's result: %w", err)
	}
	var out mcpclient.CallToolResult
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("the tool's result: %w", err)
	}
	return &out, nil
}

func (s *sdkSession) Wait() error  { return s.cs.Wait() }
func (s *sdkSession) Close() error { return s.cs.Close() }

// sdkErr is err, which mcpclient.Ended recognizes when it says the
// session ended.
func sdkErr(err error) error {
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) {
		return sdkEnded{err}
	}
	return err
}

// sdkEnded is an SDK error that says the session ended.
type sdkEnded struct{ error }

func (e sdkEnded) Unwrap() []error { return []error{e.error, mcpclient.ErrEnded} }
