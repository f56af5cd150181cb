package loop

import (
	"context"
	"errors"
	"io"
	"strings"
	"syscall"
	"time"
)

// Model calls that fail on the way to the endpoint before anything of the
// answer reached the user are made again: behind the bridge the model is
// reached through the bridge's LLM proxy, and a bridge restart closes or
// refuses that socket for a moment. A call is sent again only while
// nothing of its answer was passed on (no text delta, no tool call), so the
// client never sees a fragment twice, and only for transport failures
// (connection refused, reset, closed, the socket file gone), never for an
// answer the endpoint gave (an HTTP status, an error in the stream).
const (
	// DefaultRetryFor bounds how long a failed model call is retried
	// (Config.RetryFor).
	DefaultRetryFor = 30 * time.Second
	// retryFirst is the first wait between attempts; it doubles up to
	// retryMax.
	retryFirst = 100 * time.Millisecond
	retryMax   = 2 * time.Second
)

// Retryable reports whether err is a transport failure on the way to the
// model endpoint that makes sending the same request again safe when
// nothing of the answer arrived: the connection was refused, reset or
// closed, or the unix socket file is missing (the bridge is restarting).
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	for _, target := range []error{
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE, syscall.ENOENT,
		io.EOF, io.ErrUnexpectedEOF,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	// net/http does not export these: a kept-alive connection the server
	// closed (a bridge going down) as the request was written on it.
	msg := err.Error()
	return strings.Contains(msg, "server closed idle connection") ||
		strings.Contains(msg, "transport connection broken")
}

// stream calls the model, and again with backoff while the call fails
// before any of its answer was passed to onDelta (Retryable errors only),
// for at most l.retryFor in all. It returns the last attempt's answer and
// error; it stops waiting when ctx ends.
func (l *Loop) stream(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
	start := time.Now()
	wait := retryFirst
	for attempt := 1; ; attempt++ {
		delivered := false
		resp, err := l.model.Stream(ctx, req, func(d string) {
			delivered = delivered || d != ""
			onDelta(d)
		})
		if err == nil || ctx.Err() != nil || delivered || len(resp.ToolCalls) > 0 || !Retryable(err) ||
			l.retryFor <= 0 || time.Since(start)+wait > l.retryFor {
			if err != nil && attempt > 1 {
				l.log.Warn("model call failed; not retried again", "attempts", attempt, "for", time.Since(start).Round(time.Millisecond), "err", err)
			}
			return resp, err
		}
		l.log.Warn("model call failed before any answer; retrying", "attempt", attempt, "wait", wait, "err", err)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return resp, err
		case <-timer.C:
		}
		wait = min(2*wait, retryMax)
	}
}
