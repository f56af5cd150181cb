package testutil_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeT records a Fatalf and ends its goroutine, as testing.T does.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with a fakeT on its own goroutine and returns the failure
// message ("" when f returned).
func run(t *testing.T, f func(tb testing.TB)) string {
	ft := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ft)
	}()
	<-done
	return ft.failed
}

func TestWaits(t *testing.T) {
	t.Parallel()
	closed := make(chan int)
	close(closed)
	full := make(chan int, 1)
	full <- 7
	tests := []struct {
		name string
		f    func(tb testing.TB)
		fail string // a part of the failure message; "" means it passes
	}{
		{"eventually true", func(tb testing.TB) {
			n := 0
			testutil.Eventually(tb, "third call", time.Second, func() bool { n++; return n == 3 })
		}, ""},
		{"eventually never", func(tb testing.TB) {
			testutil.Eventually(tb, "the moon", 20*time.Millisecond, func() bool { return false })
		}, "the moon: not within 20ms"},
		{"until nil", func(tb testing.TB) {
			n := 0
			testutil.Until(tb, "third call", time.Second, func() error {
				if n++; n < 3 {
					return errors.New("not yet")
				}
				return nil
			})
		}, ""},
		{"until last error", func(tb testing.TB) {
			testutil.Until(tb, "output", 20*time.Millisecond, func() error { return errors.New(`got "x"`) })
		}, `output: not within 20ms: got "x"`},
		{"poll value", func(tb testing.TB) {
			if v := testutil.Poll(tb, "v", time.Second, func() (int, error) { return 4, nil }); v != 4 {
				tb.Fatalf("Poll = %d", v)
			}
		}, ""},
		{"poll last error", func(tb testing.TB) {
			testutil.Poll(tb, "file", 20*time.Millisecond, func() (int, error) { return 0, errors.New("still empty") })
		}, "file: not within 20ms: still empty"},
		{"within returns", func(tb testing.TB) {
			testutil.Within(tb, "add", time.Second, func() int { return 1 + 1 })
		}, ""},
		{"within hangs", func(tb testing.TB) {
			stop := make(chan struct{})
			defer close(stop)
			testutil.Within(tb, "Wait", 20*time.Millisecond, func() int { <-stop; return 0 })
		}, "Wait: nothing within 20ms"},
		{"receive", func(tb testing.TB) {
			if v := testutil.RequireReceive(tb, "seven", full, time.Second); v != 7 {
				tb.Fatalf("got %d", v)
			}
		}, ""},
		{"receive nothing", func(tb testing.TB) {
			testutil.RequireReceive(tb, "an event", make(chan int), 20*time.Millisecond)
		}, "an event: nothing within 20ms"},
		{"receive from closed", func(tb testing.TB) {
			testutil.RequireReceive(tb, "an event", closed, time.Second)
		}, "an event: channel closed"},
		{"closed", func(tb testing.TB) {
			testutil.RequireClosed(tb, "done", closed, time.Second)
		}, ""},
		{"never closed", func(tb testing.TB) {
			testutil.RequireClosed(tb, "done", make(chan int), 20*time.Millisecond)
		}, "done: not within 20ms"},
		{"send", func(tb testing.TB) {
			testutil.RequireSend(tb, "key", make(chan int, 1), 1, time.Second)
		}, ""},
		{"send not taken", func(tb testing.TB) {
			testutil.RequireSend(tb, "key", make(chan int), 1, 20*time.Millisecond)
		}, "key: not taken within 20ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, tt.f)
			if tt.fail == "" && got != "" {
				t.Errorf("failed: %s", got)
			}
			if tt.fail != "" && !strings.Contains(got, tt.fail) {
				t.Errorf("failure %q, want it to contain %q", got, tt.fail)
			}
		})
	}
}

func TestWaitClosedDrains(t *testing.T) {
	t.Parallel()
	ch := make(chan int)
	go func() {
		ch <- 1
		ch <- 2
		close(ch)
	}()
	if !testutil.WaitClosed(ch, time.Second) {
		t.Error("WaitClosed = false for a channel closed after two values")
	}
	if testutil.WaitClosed(make(chan struct{}), 10*time.Millisecond) {
		t.Error("WaitClosed = true for an open channel")
	}
}

func TestContextEnds(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t, 10*time.Millisecond)
	testutil.RequireClosed(t, "context end", ctx.Done(), time.Second)
}
