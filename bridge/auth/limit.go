package auth

import (
	"sync"
	"time"
)

// FailureLimit bounds failed authentications per client address: after
// Max failures within Window, the address is refused without a check until
// the window has passed since its first failure. Other addresses are not
// slowed at all.
type FailureLimit struct {
	// Max failures per window; default 20.
	Max int
	// Window; default one minute.
	Window time.Duration
}

// maxTracked bounds the addresses remembered: at the bound, the expired
// windows are forgotten, and every window when too few have expired (prune).
const maxTracked = 100000

type failureLimiter struct {
	lim FailureLimit
	now func() time.Time

	mu    sync.Mutex
	addrs map[string]*failures
}

type failures struct {
	since time.Time
	n     int
}

func newFailureLimiter(lim FailureLimit, now func() time.Time) *failureLimiter {
	if lim.Max <= 0 {
		lim.Max = 20
	}
	if lim.Window <= 0 {
		lim.Window = time.Minute
	}
	return &failureLimiter{lim: lim, now: now, addrs: map[string]*failures{}}
}

// allow reports whether addr may try now.
func (l *failureLimiter) allow(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.addrs[addr]
	if f == nil {
		return true
	}
	if l.now().Sub(f.since) >= l.lim.Window {
		delete(l.addrs, addr)
		return true
	}
	return f.n < l.lim.Max
}

// failed counts a failure of addr.
func (l *failureLimiter) failed(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	f := l.addrs[addr]
	if f == nil || now.Sub(f.since) >= l.lim.Window {
		if len(l.addrs) >= maxTracked {
			l.prune(now)
		}
		f = &failures{since: now}
		l.addrs[addr] = f
	}
	f.n++
}

// prune forgets expired windows, or all when none expired (a flood of
// addresses must not grow the map without bound).
func (l *failureLimiter) prune(now time.Time) {
	for a, f := range l.addrs {
		if now.Sub(f.since) >= l.lim.Window {
			delete(l.addrs, a)
		}
	}
	if len(l.addrs) >= maxTracked {
		clear(l.addrs)
	}
}
