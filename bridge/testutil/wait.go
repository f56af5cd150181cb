package testutil

import (
	"context"
	"testing"
	"time"
)

// Eventually, Until and Poll check their condition first after
// FirstInterval, then at intervals that double up to MaxInterval: a quick
// condition is seen at once, and a costly one (an engine call, an HTTP
// request) is not asked for hundreds of times a second.
const (
	FirstInterval = 5 * time.Millisecond
	MaxInterval   = 100 * time.Millisecond
)

// backoff returns the interval after d.
func backoff(d time.Duration) time.Duration {
	return min(2*d, MaxInterval)
}

// Eventually calls cond until it returns true; it fails the test, naming
// what, when timeout passes first. cond runs on the caller's goroutine, so
// it may itself call t.Fatal.
func Eventually(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for pause := FirstInterval; !cond(); pause = backoff(pause) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(pause)
	}
}

// Until calls check until it returns nil; when timeout passes first it
// fails the test, naming what and check's last error (which says what was
// seen instead).
func Until(t testing.TB, what string, timeout time.Duration, check func() error) {
	t.Helper()
	Poll(t, what, timeout, func() (struct{}, error) { return struct{}{}, check() })
}

// Poll calls check until it returns a nil error, and returns its value;
// when timeout passes first it fails the test, naming what and check's
// last error (which says what was seen instead).
func Poll[T any](t testing.TB, what string, timeout time.Duration, check func() (T, error)) T {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for pause := FirstInterval; ; pause = backoff(pause) {
		v, err := check()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(pause)
	}
}

// Within runs f on a new goroutine and returns its result; it fails the
// test, naming what, when f has not returned within timeout. That
// goroutine is left running then: the test has failed anyway.
func Within[T any](t testing.TB, what string, timeout time.Duration, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	return RequireReceive(t, what, done, timeout)
}

// Context returns a context that ends after timeout or when the test ends,
// whichever is first.
func Context(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}
