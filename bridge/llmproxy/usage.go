package llmproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// maxUsageScan bounds what the usage scanner keeps: one SSE line, or a
// whole non-streaming answer. Longer ones are passed through unscanned.
const maxUsageScan = 4 << 20

// chatRequest is what the proxy reads from a chat completion request.
type chatRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
}

// prepareChat reads a chat completion body, and for a streaming one makes
// sure the upstream reports usage (stream_options.include_usage), so that
// the proxy can count the call's tokens. It returns the body to send.
func prepareChat(body []byte) ([]byte, chatRequest, error) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, req, fmt.Errorf("request body is not a chat completion request: %w", err)
	}
	if !req.Stream {
		return body, req, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, req, fmt.Errorf("request body is not a JSON object: %w", err)
	}
	opts := map[string]json.RawMessage{}
	if raw, ok := fields["stream_options"]; ok && !bytes.Equal(raw, []byte("null")) {
		if err := json.Unmarshal(raw, &opts); err != nil {
			return nil, req, fmt.Errorf("stream_options is not an object: %w", err)
		}
	}
	if bytes.Equal(opts["include_usage"], []byte("true")) {
		return body, req, nil
	}
	opts["include_usage"] = json.RawMessage("true")
	var err error
	if fields["stream_options"], err = json.Marshal(opts); err != nil {
		return nil, req, err
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, req, fmt.Errorf("re-encode request: %w", err)
	}
	return out, req, nil
}

// usageScanner watches an answer go by and keeps the last usage it
// reports: in SSE mode the "data:" line whose chunk has a usage object (the
// final one), otherwise the JSON body's usage. It never fails the copy.
type usageScanner struct {
	sse      bool
	buf      []byte
	overflow bool // the current line (or body) outgrew maxUsageScan
	usage    *Usage
}

// Write implements io.Writer; it always accepts p.
func (s *usageScanner) Write(p []byte) (int, error) {
	if !s.sse {
		s.keep(p)
		return len(p), nil
	}
	for rest := p; len(rest) > 0; {
		line, after, found := bytes.Cut(rest, []byte("\n"))
		s.keep(line)
		if !found {
			break
		}
		s.line()
		rest = after
	}
	return len(p), nil
}

func (s *usageScanner) keep(p []byte) {
	if s.overflow || len(s.buf)+len(p) > maxUsageScan {
		s.overflow, s.buf = true, s.buf[:0]
		return
	}
	s.buf = append(s.buf, p...)
}

// line handles one complete SSE line.
func (s *usageScanner) line() {
	defer func() { s.buf, s.overflow = s.buf[:0], false }()
	data, ok := bytes.CutPrefix(bytes.TrimRight(s.buf, "\r"), []byte("data:"))
	if s.overflow || !ok || !bytes.Contains(data, []byte(`"usage"`)) {
		return
	}
	s.parse(bytes.TrimSpace(data))
}

func (s *usageScanner) parse(data []byte) {
	var v struct {
		Usage *Usage `json:"usage"`
	}
	if json.Unmarshal(data, &v) == nil && v.Usage != nil {
		s.usage = v.Usage
	}
}

// result finishes scanning and returns the usage found, if any.
func (s *usageScanner) result() (Usage, error) {
	if !s.sse && !s.overflow {
		s.parse(s.buf)
	} else if s.sse && len(s.buf) > 0 {
		s.line()
	}
	if s.usage == nil {
		return Usage{}, errors.New("the answer reported no usage")
	}
	return *s.usage, nil
}
