package wire

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// stackUse uses about kib KiB of stack, as a writer's JSON encoding and
// WebSocket write do.
//
//go:noinline
func stackUse(kib int) byte {
	var buf [1024]byte
	buf[kib%1024] = byte(kib)
	if kib > 1 {
		return stackUse(kib-1) + buf[(kib*7)%1024]
	}
	return buf[0]
}

var stackSink atomic.Int32

// BenchmarkPumpRun: one Kick and the writer's run it brings, with writers
// of several stack depths, beside a goroutine of its own that a channel
// wakes (what a connection's writer was before Pump). A run on a new
// goroutine each time paid the stack's growth at every run (4 to 5 µs at
// 24 KiB on this project's 2-core machine); runners keep their stacks.
func BenchmarkPumpRun(b *testing.B) {
	for _, kib := range []int{1, 8, 24} {
		b.Run(fmt.Sprintf("pump/%dKiB", kib), func(b *testing.B) {
			wrote := make(chan struct{}, 1)
			var pending atomic.Bool
			p := NewPump(func() bool {
				if pending.CompareAndSwap(true, false) {
					stackSink.Add(int32(stackUse(kib)))
					wrote <- struct{}{}
				}
				return false
			}, 0)
			p.Start()
			for range b.N {
				pending.Store(true)
				p.Kick()
				<-wrote
			}
		})
		b.Run(fmt.Sprintf("own-goroutine/%dKiB", kib), func(b *testing.B) {
			wrote, kick := make(chan struct{}, 1), make(chan struct{}, 1)
			go func() {
				for range kick {
					stackSink.Add(int32(stackUse(kib)))
					wrote <- struct{}{}
				}
			}()
			defer close(kick)
			for range b.N {
				kick <- struct{}{}
				<-wrote
			}
		})
	}
}
