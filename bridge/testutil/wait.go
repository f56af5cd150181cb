package testutil

import (
	"context"
	"testing"
	"time"
)

// Interval is how often Eventually and Poll check their condition.
const Interval = 5 * time.Millisecond

// Eventually calls cond every Interval until it returns true; it fails the
// test, naming what, when timeout passes first. cond runs on the caller's
// goroutine, so it may itself call t.Fatal.
func Eventually(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(Interval)
	}
}

// Until calls check every Interval until it returns nil; when timeout
// passes first it fails the test, naming what and check's last error
// (which says what was seen instead).
func Until(t testing.TB, what string, timeout time.Duration, check func() error) {
	t.Helper()
	Poll(t, what, timeout, func() (struct{}, error) { return struct{}{}, check() })
}

// Poll calls check every Interval until it returns a nil error, and
// returns its value; when timeout passes first it fails the test, naming
// what and check's last error (which says what was seen instead).
func Poll[T any](t testing.TB, what string, timeout time.Duration, check func() (T, error)) T {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v, err := check()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(Interval)
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
