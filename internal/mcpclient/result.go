package mcpclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Text is a tool result's text contents, one per line (images, audio and
// links named, an embedded resource's text or URI), or its structured
// content as JSON when it sent no text.
func Text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
		case *mcp.ImageContent:
			fmt.Fprintf(&b, "[image %s, %d bytes]", c.MIMEType, len(c.Data))
		case *mcp.AudioContent:
			fmt.Fprintf(&b, "[audio %s, %d bytes]", c.MIMEType, len(c.Data))
		case *mcp.ResourceLink:
			fmt.Fprintf(&b, "[resource %s]", c.URI)
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				b.WriteString(c.Resource.Text)
			} else if c.Resource != nil {
				fmt.Fprintf(&b, "[resource %s]", c.Resource.URI)
			}
		}
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			b.Write(raw)
		}
	}
	return b.String()
}

// emptySchema is the input schema of a tool that has none that is a JSON
// object.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// Schema is t's input schema as JSON, or the empty object schema when it
// has none that is a JSON object.
func Schema(t *mcp.Tool) json.RawMessage {
	raw, err := json.Marshal(t.InputSchema)
	var probe map[string]any
	if err != nil || json.Unmarshal(raw, &probe) != nil || probe == nil {
		return emptySchema
	}
	return raw
}

// Ended reports whether a call's err says its session ended: the server
// exited or hung up.
func Ended(err error) bool {
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF)
}
