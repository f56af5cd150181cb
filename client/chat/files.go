package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/boxwire/boxwire/bridge/wire"
)

// FileTransfer names the workspace side of a transfer.
type FileTransfer struct {
	// Thread is the bridge thread whose workspace is meant; empty means the
	// server is a standalone agent (its own workspace, wire.FilesPath).
	Thread string
	// Path is the workspace path: the folder an upload goes into, or the
	// file or folder a download reads.
	Path string
}

// filesRequest builds the HTTP request for a transfer and the client to
// send it with.
func filesRequest(ctx context.Context, cfg Config, ft FileTransfer, method string, raw bool, body io.Reader) (*http.Request, *http.Client, func(), error) {
	ep, err := resolve(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	u := ep.httpBase()
	u.Path = wire.FilesPath
	if ft.Thread != "" {
		threadPath(u, ft.Thread, "/files") // http.go
	}
	q := url.Values{"path": {ft.Path}}
	if raw {
		q.Set("format", "raw")
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, nil, nil, err
	}
	if cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
	}
	client, done := http.DefaultClient, func() {}
	if ep.dial != nil {
		tr := &http.Transport{DialContext: ep.dial, DisableKeepAlives: true}
		client, done = &http.Client{Transport: tr}, tr.CloseIdleConnections
	}
	return req, client, done, nil
}

// Upload sends a tar stream (contentType wire.ContentTypeTar, extracted
// into the folder ft.Path) or one file's bytes (wire.ContentTypeRaw,
// written to ft.Path) and returns the per-file results. size, when known,
// is sent as Content-Length (-1: unknown). It blocks until the server has
// answered or ctx ends; it reads body to its end or until the server
// stops reading. A refused request is an *HTTPError that unwraps to its
// wire.Error (e.g. code too_large, invalid_path).
func Upload(ctx context.Context, cfg Config, ft FileTransfer, contentType string, body io.Reader, size int64) (wire.TransferResult, error) {
	req, client, done, err := filesRequest(ctx, cfg, ft, http.MethodPut, false, body)
	if err != nil {
		return wire.TransferResult{}, fmt.Errorf("upload %s: %w", ft.Path, err)
	}
	defer done()
	req.Header.Set("Content-Type", contentType)
	req.ContentLength = size
	if size == 0 {
		req.Body = http.NoBody
	}
	resp, err := client.Do(req)
	if err != nil {
		return wire.TransferResult{}, fmt.Errorf("upload %s: %w", ft.Path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return wire.TransferResult{}, fmt.Errorf("upload %s: %w", ft.Path, newHTTPError(resp))
	}
	var res wire.TransferResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return wire.TransferResult{}, fmt.Errorf("upload %s: decode result: %w", ft.Path, err)
	}
	return res, nil
}

// Download is an open download: Body is the tar stream (or the raw file),
// Size its length when the server said (-1 otherwise). Read Body to its
// end, then call Result for the per-file failures; Close always.
type Download struct {
	Body io.ReadCloser
	Size int64
	resp *http.Response
	done func()
}

// Result returns the transfer's results from the trailer; call it after
// Body reached EOF. A download whose trailer is missing (a raw download)
// returns a zero result.
func (d *Download) Result() (wire.TransferResult, error) {
	var res wire.TransferResult
	v := d.resp.Trailer.Get(wire.ResultsTrailer)
	if v == "" {
		return res, nil
	}
	if err := json.Unmarshal([]byte(v), &res); err != nil {
		return res, fmt.Errorf("decode results trailer: %w", err)
	}
	return res, nil
}

// Close releases the connection. It is idempotent.
func (d *Download) Close() error {
	err := d.Body.Close()
	d.done()
	return err
}

// OpenDownload asks for ft.Path as a tar stream (raw false) or its bytes
// (raw true: a file only). It blocks until the response headers arrive or
// ctx ends (which also ends reading Body). Refusals are *HTTPError values
// unwrapping to a wire.Error: file_not_found, permission_denied,
// is_directory, invalid_path.
func OpenDownload(ctx context.Context, cfg Config, ft FileTransfer, raw bool) (*Download, error) {
	req, client, done, err := filesRequest(ctx, cfg, ft, http.MethodGet, raw, nil)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", ft.Path, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		done()
		return nil, fmt.Errorf("download %s: %w", ft.Path, err)
	}
	if resp.StatusCode/100 != 2 {
		defer done()
		defer resp.Body.Close()
		return nil, fmt.Errorf("download %s: %w", ft.Path, newHTTPError(resp))
	}
	return &Download{Body: resp.Body, Size: resp.ContentLength, resp: resp, done: done}, nil
}

// ErrTransferIncomplete marks a download whose results list failures.
var ErrTransferIncomplete = errors.New("some files were not transferred")
