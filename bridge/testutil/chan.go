package testutil

import (
	"testing"
	"time"
)

// RequireReceive returns the next value from ch; it fails the test, naming
// what, when nothing arrives within timeout or ch is closed.
func RequireReceive[T any](t testing.TB, what string, ch <-chan T, timeout time.Duration) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed", what)
		}
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing within %v", what, timeout)
	}
	var zero T
	return zero
}

// RequireClosed waits for ch to be closed, dropping any values sent before;
// it fails the test, naming what, when ch is still open after timeout.
func RequireClosed[T any](t testing.TB, what string, ch <-chan T, timeout time.Duration) {
	t.Helper()
	if !WaitClosed(ch, timeout) {
		t.Fatalf("%s: not within %v", what, timeout)
	}
}

// WaitClosed waits at most timeout for ch to be closed, dropping any values
// sent before, and reports whether it was. It never fails the test, so it
// may run where failing is not allowed (a hook on another goroutine): a
// missed step then shows as a wrong result instead.
func WaitClosed[T any](ch <-chan T, timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return true
			}
		case <-timer.C:
			return false
		}
	}
}

// RequireSend sends v on ch; it fails the test, naming what, when nobody
// takes it within timeout.
func RequireSend[T any](t testing.TB, what string, ch chan<- T, v T, timeout time.Duration) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case ch <- v:
	case <-timer.C:
		t.Fatalf("%s: not taken within %v", what, timeout)
	}
}
