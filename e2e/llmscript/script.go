package llmscript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// DefaultModel is the model name a script without "model" answers as.
const DefaultModel = "scripted"

// Script is a conversation script. It is plain data, safe to share once
// built; [Parse] and [Load] validate it, and a Script built in Go can be
// checked with [Script.Validate].
type Script struct {
	// Model is the model name listed by /v1/models; empty means
	// [DefaultModel].
	Model string `json:"model,omitempty"`
	// Turns are tried in order; the first whose When matches the last user
	// message answers.
	Turns []Turn `json:"turns"`
}

// Turn is the scripted answer to one user message.
type Turn struct {
	// When is a case-insensitive substring of the last user message; empty
	// matches any message.
	When string `json:"when,omitempty"`
	// Steps are answered one per request: step i answers a request that
	// has i assistant messages after the last user message.
	Steps []Step `json:"steps"`
}

// Step is one model answer: Content, ToolCalls or both (text streamed
// before the calls, as real models do), or else Error alone.
type Step struct {
	// Content is assistant text; without ToolCalls it finishes with "stop".
	Content string `json:"content,omitempty"`
	// ToolCalls are function calls, finished with "tool_calls".
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Error answers with an HTTP error instead of a completion.
	Error *Error `json:"error,omitempty"`
	// DelayMS is how long to wait before answering, in milliseconds.
	DelayMS int `json:"delay_ms,omitempty"`
	// ChunkDelayMS is the pause between streamed chunks, in milliseconds.
	ChunkDelayMS int `json:"chunk_delay_ms,omitempty"`
	// CutAfterChunks, when above zero, makes a streamed answer break off
	// after that many chunks: the connection is dropped mid-response, as
	// when a model endpoint dies halfway (non-streamed answers ignore it).
	CutAfterChunks int `json:"cut_after_chunks,omitempty"`
}

// ToolCall is one scripted function call.
type ToolCall struct {
	// ID is the tool-call id; empty means "call_<turn>_<step>_<n>"
	// (all zero-based).
	ID string `json:"id,omitempty"`
	// Name is the function name, e.g. "execute".
	Name string `json:"name"`
	// Arguments is any JSON value, sent as its compact JSON text. A JSON
	// string is sent as its contents instead, so a script can send raw (even
	// malformed) argument text. Empty means "{}".
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Error is a scripted HTTP error answer.
type Error struct {
	// Status is the HTTP status, 400 to 599.
	Status int `json:"status"`
	// Message is the error message.
	Message string `json:"message"`
	// Type is the OpenAI error type; empty derives one from Status.
	Type string `json:"type,omitempty"`
	// Code is the OpenAI error code; empty sends null.
	Code string `json:"code,omitempty"`
}

// Load reads and parses the script file at path. See [Parse].
func Load(path string) (Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Script{}, fmt.Errorf("load script: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return Script{}, fmt.Errorf("load script %s: %w", path, err)
	}
	return s, nil
}

// Parse decodes a JSON script and validates it. Unknown fields are errors,
// so a typo in a script fails loudly instead of being ignored.
func Parse(data []byte) (Script, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("parse script: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Script{}, errors.New("parse script: trailing data after the script object")
	}
	if err := s.Validate(); err != nil {
		return Script{}, err
	}
	return s, nil
}

// Validate reports the first problem in s: no turns, a step with neither
// content nor tool_calls nor error (or error with another), a tool call
// without a name or with invalid JSON arguments, an error status outside
// 400–599, or a negative delay or cut_after_chunks.
func (s Script) Validate() error {
	if len(s.Turns) == 0 {
		return errors.New("invalid script: no turns")
	}
	for ti, t := range s.Turns {
		for si, st := range t.Steps {
			if err := st.validate(); err != nil {
				return fmt.Errorf("invalid script: turn %d step %d: %w", ti, si, err)
			}
		}
	}
	return nil
}

func (st Step) validate() error {
	answers := st.Content != "" || len(st.ToolCalls) > 0
	switch {
	case st.Error != nil && answers:
		return errors.New("has an error and an answer; want one")
	case st.Error == nil && !answers:
		return errors.New("has no content, tool_calls or error")
	}
	if st.DelayMS < 0 || st.ChunkDelayMS < 0 {
		return errors.New("negative delay")
	}
	if st.CutAfterChunks < 0 {
		return errors.New("negative cut_after_chunks")
	}
	for i, c := range st.ToolCalls {
		if strings.TrimSpace(c.Name) == "" {
			return fmt.Errorf("tool call %d: no name", i)
		}
		if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
			return fmt.Errorf("tool call %d: arguments are not valid JSON", i)
		}
	}
	if e := st.Error; e != nil {
		if e.Status < 400 || e.Status > 599 {
			return fmt.Errorf("error status %d outside 400-599", e.Status)
		}
		if e.Message == "" {
			return errors.New("error without a message")
		}
	}
	return nil
}

// model returns the script's model name or the default.
func (s Script) model() string {
	if s.Model == "" {
		return DefaultModel
	}
	return s.Model
}

// argumentsText is the arguments text sent to the client for c.
func (c ToolCall) argumentsText() string {
	raw := bytes.TrimSpace(c.Arguments)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "{}"
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return s
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}
