package mcpclient_test

import (
	"encoding/json"
	"testing"

	"github.com/boxwire/boxwire/internal/mcpclient"
)

// TestText: every content type as the model reads it, from the JSON a
// server sends.
func TestText(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`, "a\nb"},
		{`{"content":[{"type":"image","mimeType":"image/png","data":"aGVsbG8="},{"type":"audio","mimeType":"audio/wav","data":"aGk="}]}`,
			"[image image/png, 5 bytes]\n[audio audio/wav, 2 bytes]"},
		{`{"content":[{"type":"resource_link","uri":"file:///a","name":"a"}]}`, "[resource file:///a]"},
		{`{"content":[{"type":"resource","resource":{"uri":"file:///b","text":"inside"}},{"type":"resource","resource":{"uri":"file:///c","blob":"AA=="}}]}`,
			"inside\n[resource file:///c]"},
		{`{"content":[],"structuredContent":{ "n": 1 }}`, `{"n":1}`},
		{`{"content":[{"type":"text","text":"t"}],"structuredContent":{"n":1}}`, "t"},
		{`{"content":[{"type":"future","x":1}]}`, ""},
	} {
		var res mcpclient.CallToolResult
		if err := json.Unmarshal([]byte(tc.raw), &res); err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		if got := mcpclient.Text(&res); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.raw, got, tc.want)
		}
	}
}

// TestSchema: a tool's input schema is passed on when it is an object,
// else the empty object schema is.
func TestSchema(t *testing.T) {
	empty := `{"type":"object","properties":{}}`
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"q":{"type":"string"}}}`, `{"type":"object","properties":{"q":{"type":"string"}}}`},
		{``, empty},
		{`null`, empty},
		{`true`, empty},
		{`[1]`, empty},
	} {
		if got := string(mcpclient.Schema(mcpclient.Tool{Name: "x", InputSchema: json.RawMessage(tc.schema)})); got != tc.want {
			t.Errorf("%q: %s", tc.schema, got)
		}
	}
}
