package chat

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// ExportEvents copies a thread's stored events with seq > after from the
// bridge's GET /v1/threads/{id}/events (JSON lines, oldest first) to w and
// returns the bytes copied. It blocks until the whole log is copied or ctx
// ends. A bridge without the endpoint, or a thread it does not know,
// answers with an *HTTPError (404).
func ExportEvents(ctx context.Context, cfg Config, id string, after uint64, w io.Writer) (int64, error) {
	resp, err := call(ctx, cfg, http.MethodGet, func(u *url.URL) {
		threadPath(u, id, "/events") // http.go
		u.RawQuery = url.Values{"after": {strconv.FormatUint(after, 10)}}.Encode()
	}, nil)
	if err != nil {
		return 0, fmt.Errorf("export %s: %w", id, err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("export %s: %w", id, err)
	}
	return n, nil
}
