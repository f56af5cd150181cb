package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/boxwire/boxwire/bridge/wire"
	openai "github.com/sashabaranov/go-openai"
)

// DefaultModel is the model OpenAI asks for when OpenAIConfig.Model is empty.
const DefaultModel = "gpt-4o-mini"

// emptyMessagesLimit is how many empty or comment lines the stream may
// carry in a row; servers that send keep-alives trip go-openai's 300.
const emptyMessagesLimit = 100_000

// maxErrorBody caps how much of a non-JSON error body an error repeats.
const maxErrorBody = 512

// OpenAIConfig configures OpenAI. It holds the API key: printing or
// logging it shows the key redacted.
type OpenAIConfig struct {
	// BaseURL is the API root, e.g. "https://api.openai.com/v1"; empty
	// means OpenAI's. Behind the bridge it is "http://boxwire-llm/v1" and
	// the host is only a label (see UnixSocketClient).
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (the bridge's
	// proxy adds the real key).
	APIKey string
	// Model names the model (DefaultModel if empty).
	Model string
	// HTTPClient makes the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// String describes the config with the key redacted.
func (c OpenAIConfig) String() string {
	return fmt.Sprintf("OpenAIConfig{BaseURL:%q APIKey:%s Model:%q}", c.BaseURL, redacted(c.APIKey), c.Model)
}

// LogValue logs the config with the key redacted.
func (c OpenAIConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", c.BaseURL),
		slog.String("api_key", redacted(c.APIKey)),
		slog.String("model", c.Model),
	)
}

func redacted(key string) string {
	if key == "" {
		return "(none)"
	}
	return "[redacted]"
}

// UnixSocketClient returns an HTTP client that sends every request over the
// unix socket at path, whatever the URL's host; the bridge's LLM proxy is
// reached this way.
func UnixSocketClient(path string) *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		},
		ForceAttemptHTTP2: false,
		MaxIdleConns:      4,
	}}
}

// OpenAI is a Model backed by an OpenAI-compatible chat completions
// endpoint, streamed. It is safe for concurrent use.
type OpenAI struct {
	client *openai.Client
	model  string
	key    string
}

// NewOpenAI returns a Model for cfg.
func NewOpenAI(cfg OpenAIConfig) *OpenAI {
	cc := openai.DefaultConfig(cfg.APIKey)
	if cfg.BaseURL != "" {
		cc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	}
	if cfg.HTTPClient != nil {
		cc.HTTPClient = cfg.HTTPClient
	}
	cc.EmptyMessagesLimit = emptyMessagesLimit
	model := cfg.Model
	if model == "" {
		model = DefaultModel
	}
	return &OpenAI{client: openai.NewClientWithConfig(cc), model: model, key: cfg.APIKey}
}

// Stream implements Model with a streamed chat completion. It blocks until
// the stream ends or ctx ends; endpoint failures are *EndpointError.
func (o *OpenAI) Stream(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
	stream, err := o.client.CreateChatCompletionStream(ctx, o.request(req))
	if err != nil {
		return Response{}, o.endpointError(err)
	}
	defer stream.Close()
	var (
		text  strings.Builder
		calls callMerger
		resp  Response
	)
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			resp.Text = text.String()
			if ctx.Err() != nil {
				return resp, ctx.Err()
			}
			return resp, o.endpointError(err)
		}
		if chunk.Usage != nil {
			resp.Usage = wire.Usage{
				PromptTokens:     chunk.Usage.PromptTokens,
				CompletionTokens: chunk.Usage.CompletionTokens,
				TotalTokens:      chunk.Usage.TotalTokens,
			}
		}
		for _, choice := range chunk.Choices { // the usage chunk has none
			if choice.Index != 0 {
				continue
			}
			if choice.Delta.Content != "" {
				text.WriteString(choice.Delta.Content)
				onDelta(choice.Delta.Content)
			}
			for _, tc := range choice.Delta.ToolCalls {
				calls.add(tc)
			}
			if choice.FinishReason != "" {
				resp.FinishReason = string(choice.FinishReason)
			}
		}
	}
	resp.Text = text.String()
	if resp.FinishReason == "" {
		// Every compatible server ends a choice with a finish_reason; a
		// stream that stops without one was cut (the endpoint died, a
		// proxy dropped it). Taking it as an answer would give the model's
		// half sentence or half tool call as if it were whole.
		return resp, o.endpointError(errStreamCut)
	}
	resp.ToolCalls = calls.finish()
	return resp, nil
}

// errStreamCut is why a stream that ended without a finish_reason fails.
var errStreamCut = errors.New("the model's stream ended before the model finished (no finish_reason)")

func (o *OpenAI) request(req Request) openai.ChatCompletionRequest {
	out := openai.ChatCompletionRequest{
		Model:         o.model,
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	}
	for _, m := range req.Messages {
		msg := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{
				ID:       c.ID,
				Type:     openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: c.Name, Arguments: c.Arguments},
			})
		}
		out.Messages = append(out.Messages, msg)
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, openai.Tool{
			Type:     openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{Name: t.Name, Description: t.Description, Parameters: params},
		})
	}
	return out
}
