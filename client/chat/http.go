package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/boxwire/boxwire/bridge/wire"
)

// maxErrorBody bounds how much of an HTTP error body is read.
const maxErrorBody = 4 << 10

// HTTPError is a non-success HTTP answer from the bridge. It unwraps to
// ErrUnauthorized for 401 and to the wire.Error the body carried, if any,
// so errors.Is(err, ErrUnauthorized) and errors.As(err, &wire.Error{})
// both work.
type HTTPError struct {
	StatusCode int
	// Wire is the decoded JSON error body, or nil when the body was not one.
	Wire *wire.Error
	// Body is the start of the body when it was not a JSON error.
	Body string
}

// Error implements error.
func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("http %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.StatusCode == http.StatusUnauthorized {
		msg = "http 401 " + ErrUnauthorized.Error()
	}
	switch {
	case e.Wire != nil:
		msg += ": " + e.Wire.Error()
	case e.Body != "":
		msg += ": " + e.Body
	}
	return msg
}

// Unwrap returns ErrUnauthorized for 401 and the decoded wire.Error.
func (e *HTTPError) Unwrap() []error {
	var errs []error
	if e.StatusCode == http.StatusUnauthorized {
		errs = append(errs, ErrUnauthorized)
	}
	if e.Wire != nil {
		errs = append(errs, *e.Wire)
	}
	return errs
}

// newHTTPError reads (a bounded part of) resp.Body, which the caller closes,
// and decodes it as a wire.Error, a wire error envelope, or plain text.
func newHTTPError(resp *http.Response) *HTTPError {
	e := &HTTPError{StatusCode: resp.StatusCode}
	if resp.Body == nil {
		return e
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var werr wire.Error
	if json.Unmarshal(body, &werr) == nil && werr.Code != "" {
		e.Wire = &werr
		return e
	}
	var wrapped struct {
		Error wire.Error `json:"error"`
	}
	if json.Unmarshal(body, &wrapped) == nil && wrapped.Error.Code != "" {
		e.Wire = &wrapped.Error
		return e
	}
	if env, err := wire.Parse(body); err == nil && env.Type == wire.TypeError {
		if env.Decode(&werr) == nil && werr.Code != "" {
			e.Wire = &werr
			return e
		}
	}
	e.Body = strings.TrimSpace(string(body))
	if strings.EqualFold(e.Body, http.StatusText(e.StatusCode)) {
		e.Body = "" // says nothing the status does not
	}
	return e
}

// DeleteThread removes a thread and its sandbox through the bridge's HTTP
// API (DELETE /v1/threads/{id}), using cfg's URL, token and dialer. It
// blocks until the bridge answers or ctx ends. A 404 is an *HTTPError that
// unwraps to a wire.Error with code not_found.
func DeleteThread(ctx context.Context, cfg Config, id string) error {
	if id == "" {
		return errors.New("delete thread: empty id")
	}
	resp, err := call(ctx, cfg, http.MethodDelete, func(u *url.URL) { threadPath(u, id, "") }, nil)
	if err != nil {
		return fmt.Errorf("delete thread %s: %w", id, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return nil
}

// ListThreads returns the body of the bridge's GET /v1/threads (a JSON
// document describing its threads). It blocks until the bridge answers or
// ctx ends.
func ListThreads(ctx context.Context, cfg Config) ([]byte, error) {
	resp, err := call(ctx, cfg, http.MethodGet, func(u *url.URL) { u.Path = "/v1/threads" }, nil)
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	return body, nil
}

// call sends method to the bridge's HTTP API, at the path (and query) at
// sets on the bridge's base URL, with body as JSON (none when nil) and
// cfg's token, over cfg's dialer. A 2xx answer is returned for the caller
// to read and close; any other is an *HTTPError.
func call(ctx context.Context, cfg Config, method string, at func(u *url.URL), body any) (*http.Response, error) {
	ep, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	u := ep.httpBase()
	at(u)
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := ep.do(req, cfg.Token)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, newHTTPError(resp)
	}
	return resp, nil
}

// do sends req with the bearer token, over the endpoint's own dialer when
// it has one (a unix socket). Connections are not kept: these calls are
// rare, and nothing is left open when they are done.
func (ep endpoint) do(req *http.Request, token string) (*http.Response, error) {
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := http.DefaultClient
	if ep.dial != nil {
		client = &http.Client{Transport: &http.Transport{DialContext: ep.dial, DisableKeepAlives: true}}
	}
	return client.Do(req)
}

// threadPath points u at /v1/threads/{id}{rest} (rest: "" or a sub-path
// such as "/events"), with id escaped.
func threadPath(u *url.URL, id, rest string) {
	u.Path = "/v1/threads/" + id + rest
	u.RawPath = "/v1/threads/" + url.PathEscape(id) + rest
}
