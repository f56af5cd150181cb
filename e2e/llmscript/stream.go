package llmscript

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// Chunk sizes, in runes: small enough that any real sentence or arguments
// object arrives in several pieces.
const (
	textChunkRunes = 6
	argsChunkRunes = 8
)

// completion is one answer with its response metadata.
type completion struct {
	id      string
	created int64
	model   string
	answer  answer
	usage   openai.Usage
}

// response is the non-streaming chat.completion object.
func (c completion) response() response {
	msg := message{Role: openai.ChatMessageRoleAssistant, ToolCalls: c.answer.calls}
	if c.answer.content != "" || len(c.answer.calls) == 0 {
		msg.Content = &c.answer.content
	}
	return response{
		ID: c.id, Object: "chat.completion", Created: c.created, Model: c.model,
		Choices: []choice{{Message: msg, FinishReason: string(c.answer.finishReason())}},
		Usage:   c.usage,
	}
}

// The response types mirror the API's chat.completion object (go-openai's
// own types would add Azure-only fields and drop "content": null).
type response struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []choice     `json:"choices"`
	Usage   openai.Usage `json:"usage"`
}

type choice struct {
	Index        int       `json:"index"`
	Message      message   `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
}

type message struct {
	Role      string            `json:"role"`
	Content   *string           `json:"content"`
	Refusal   *string           `json:"refusal"`
	ToolCalls []openai.ToolCall `json:"tool_calls,omitempty"`
}

// The chunk types mirror the API's chat.completion.chunk exactly (go-openai's
// own types would send empty "type" fields in later tool-call deltas).
type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *openai.Usage `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []toolCallDelta `json:"tool_calls,omitempty"`
}

type toolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function functionDelta `json:"function"`
}

type functionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// deltas returns the stream's choice deltas in order: the role, the text
// pieces, then for each call a header delta followed by argument pieces.
func (c completion) deltas() []delta {
	empty := ""
	out := []delta{{Role: openai.ChatMessageRoleAssistant, Content: &empty}}
	for _, piece := range split(c.answer.content, textChunkRunes) {
		out = append(out, delta{Content: &piece})
	}
	for i, call := range c.answer.calls {
		out = append(out, delta{ToolCalls: []toolCallDelta{{
			Index: i, ID: call.ID, Type: string(call.Type),
			Function: functionDelta{Name: call.Function.Name},
		}}})
		for _, piece := range split(call.Function.Arguments, argsChunkRunes) {
			out = append(out, delta{ToolCalls: []toolCallDelta{{
				Index: i, Function: functionDelta{Arguments: piece},
			}}})
		}
	}
	return out
}

// stream writes the answer as server-sent events, flushing each chunk,
// pausing the answer's chunk delay between chunks. It returns when [DONE]
// is written, ctx ends or a write fails.
func (c completion) stream(ctx context.Context, w http.ResponseWriter, includeUsage bool) error {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)

	var events []any
	for _, d := range c.deltas() {
		events = append(events, c.chunk([]chunkChoice{{Delta: d}}))
	}
	finish := string(c.answer.finishReason())
	events = append(events, c.chunk([]chunkChoice{{FinishReason: &finish}}))
	if includeUsage {
		last := c.chunk([]chunkChoice{})
		last.Usage = &c.usage
		events = append(events, last)
	}
	events = append(events, "[DONE]")

	for i, ev := range events {
		if i > 0 {
			if err := sleep(ctx, c.answer.chunkDelay); err != nil {
				// Tell a client that is still there (server shutdown) that
				// the stream was cut, rather than ending it silently.
				_ = writeEvent(w, rc, newErrorBody(http.StatusServiceUnavailable,
					"stream ended: "+err.Error(), "", ""))
				return err
			}
		}
		if c.answer.cutAfter > 0 && i == c.answer.cutAfter {
			// Break off mid-response: net/http drops the connection
			// without ending the chunked body, so the client reads an
			// unexpected EOF, not a finished stream.
			panic(http.ErrAbortHandler)
		}
		if err := writeEvent(w, rc, ev); err != nil {
			return err
		}
	}
	return nil
}

func (c completion) chunk(choices []chunkChoice) chunk {
	return chunk{
		ID: c.id, Object: "chat.completion.chunk", Created: c.created,
		Model: c.model, Choices: choices,
	}
}

// writeEvent writes one "data:" event (a string as is, anything else as
// JSON) and flushes it.
func writeEvent(w http.ResponseWriter, rc *http.ResponseController, ev any) error {
	data, ok := ev.(string)
	if !ok {
		b, err := marshal(ev)
		if err != nil {
			return err
		}
		data = string(b)
	}
	if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
		return fmt.Errorf("write chunk: %w: %w", errClientGone, err)
	}
	if err := rc.Flush(); err != nil {
		return fmt.Errorf("flush chunk: %w: %w", errClientGone, err)
	}
	return nil
}

// marshal encodes v as compact JSON without HTML escaping, as the API does.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// split cuts s into pieces of at most n runes, never inside a rune.
func split(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		end, runes := 0, 0
		for end < len(s) && runes < n {
			_, size := utf8.DecodeRuneInString(s[end:])
			end += size
			runes++
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}
