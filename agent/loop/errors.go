package loop

import (
	"errors"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// EndpointError is a failure reported by the model endpoint or on the way
// to it. Its text never contains the API key.
type EndpointError struct {
	// StatusCode is the HTTP status, or 0 if there was no HTTP answer
	// (a transport failure, or an error sent inside the stream).
	StatusCode int
	// Message is the endpoint's explanation.
	Message string
	// Err is the underlying error.
	Err error
}

// Error says what failed, with the HTTP status when there was one.
func (e *EndpointError) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("model endpoint answered %d: %s", e.StatusCode, e.Message)
	}
	return "model endpoint: " + e.Message
}

// Unwrap returns the underlying error.
func (e *EndpointError) Unwrap() error { return e.Err }

// endpointError classifies err as an *EndpointError with the key removed.
func (o *OpenAI) endpointError(err error) error {
	e := &EndpointError{Err: err}
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		e.StatusCode, e.Message = apiErr.HTTPStatusCode, apiErr.Message
		if apiErr.Type != "" {
			e.Message += " (" + apiErr.Type + ")"
		}
	case errors.As(err, &reqErr):
		e.StatusCode = reqErr.HTTPStatusCode
		body := strings.TrimSpace(string(reqErr.Body))
		if len(body) > maxErrorBody {
			body = body[:maxErrorBody] + "…"
		}
		e.Message = body
		if e.Message == "" {
			e.Message = reqErr.HTTPStatus
		}
	default:
		e.Message = err.Error()
	}
	if o.key != "" {
		e.Message = strings.ReplaceAll(e.Message, o.key, "[redacted]")
	}
	e.Message = strings.ToValidUTF8(e.Message, "\uFFFD")
	return e
}
