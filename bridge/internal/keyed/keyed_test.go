package keyed_test

import (
	"sync"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/internal/keyed"
)

func TestSameKeyTakesTurns(t *testing.T) {
	var m keyed.Mutex
	unlock := m.Lock("a")
	got := make(chan struct{})
	go func() {
		defer close(got)
		m.Lock("a")()
	}()
	select {
	case <-got:
		t.Fatal("a second Lock of the same key did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	unlock()
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never got the key after unlock")
	}
	if n := m.Held(); n != 0 {
		t.Fatalf("%d entries left after every unlock, want 0", n)
	}
}

func TestOtherKeysDoNotWait(t *testing.T) {
	var m keyed.Mutex
	defer m.Lock("a")()
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Lock("b")()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Lock(b) waited for a's holder")
	}
}

func TestUnlockTwiceIsHarmless(t *testing.T) {
	var m keyed.Mutex
	unlock := m.Lock("a")
	unlock()
	unlock() // must not unlock a mutex someone else holds, nor panic
	second := m.Lock("a")
	third := make(chan struct{})
	go func() {
		defer close(third)
		m.Lock("a")()
	}()
	unlock() // the first holder's stale unlock: still a no-op
	select {
	case <-third:
		t.Fatal("a stale unlock released another holder's lock")
	case <-time.After(50 * time.Millisecond):
	}
	second()
	select {
	case <-third:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never got the key")
	}
}

func TestManyGoroutinesExclusive(t *testing.T) {
	var m keyed.Mutex
	var wg sync.WaitGroup
	var counts [3]int // counts[k] is touched only under key k's lock
	for i := range 64 {
		k := i % 3
		key := []string{"x", "y", "z"}[k]
		wg.Go(func() {
			for range 100 {
				unlock := m.Lock(key)
				counts[k]++ // the race detector catches overlap
				unlock()
			}
		})
	}
	wg.Wait()
	total := 0
	for _, n := range counts {
		total += n
	}
	if total != 6400 {
		t.Fatalf("counted %d, want 6400", total)
	}
	if n := m.Held(); n != 0 {
		t.Fatalf("%d entries left, want 0", n)
	}
}

func TestTryLockDoesNotWait(t *testing.T) {
	var m keyed.Mutex
	unlock := m.Lock("a")
	if _, ok := m.TryLock("a"); ok {
		t.Fatal("TryLock took a key another holder has")
	}
	other, ok := m.TryLock("b")
	if !ok {
		t.Fatal("TryLock of a free key failed")
	}
	other()
	unlock()
	again, ok := m.TryLock("a")
	if !ok {
		t.Fatal("TryLock failed after the holder unlocked")
	}
	again()
	if n := m.Held(); n != 0 {
		t.Fatalf("%d entries left after every unlock, want 0", n)
	}
}
