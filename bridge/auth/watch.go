package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// watch is one live connection's interest in its credentials.
type watch struct {
	ch   chan struct{}
	fn   func() // WatchFunc's; nil for Watch
	keys []string
}

// Watch returns a channel closed when p's key is revoked or p's user is
// deleted, so a long-lived connection can end at once; stop forgets the
// watch (call it when the connection ends). The admin token is never
// revoked, so its channel never closes; stop is still needed.
func (a *Authenticator) Watch(p Principal) (<-chan struct{}, func()) {
	w := a.watch(p, nil)
	return w.ch, func() { a.unwatch(w) }
}

// WatchFunc is Watch with a callback instead of a channel, for the many
// idle connections that would each need a goroutine to wait on one: end
// is called once, on the goroutine that revoked the credentials, so it
// must not block. stop forgets the watch; end may still be running (or
// start) while stop is called.
func (a *Authenticator) WatchFunc(p Principal, end func()) (stop func()) {
	w := a.watch(p, end)
	return func() { a.unwatch(w) }
}

// watch registers a watch of p's user and key.
func (a *Authenticator) watch(p Principal, fn func()) *watch {
	w := &watch{ch: make(chan struct{}), fn: fn, keys: []string{"user:" + p.User}}
	if p.KeyID != "" {
		w.keys = append(w.keys, "key:"+p.KeyID)
	}
	a.mu.Lock()
	for _, k := range w.keys {
		if a.watchers[k] == nil {
			a.watchers[k] = map[*watch]struct{}{}
		}
		a.watchers[k][w] = struct{}{}
	}
	a.mu.Unlock()
	return w
}

func (a *Authenticator) unwatch(w *watch) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range w.keys {
		delete(a.watchers[k], w)
		if len(a.watchers[k]) == 0 {
			delete(a.watchers, k)
		}
	}
}

// notify closes and forgets every watch of key.
func (a *Authenticator) notify(key string) {
	a.mu.Lock()
	ws := a.watchers[key]
	delete(a.watchers, key)
	for w := range ws {
		for _, k := range w.keys {
			if k != key {
				delete(a.watchers[k], w)
			}
		}
	}
	a.mu.Unlock()
	for w := range ws {
		close(w.ch)
		if w.fn != nil {
			w.fn()
		}
	}
}

// Recheck reads every watched key from the store again and ends the
// watches of those revoked or gone since (as RevokeKey does): a key
// revoked by another bridge on a shared store, or by `bridge keys
// --store` on the database, closes this bridge's connections too. A
// deleted user's keys go with them, so their connections end as well;
// OIDC connections are watched by user only and are not rechecked. A
// bridge calls it periodically; it returns how many keys it ended.
func (a *Authenticator) Recheck(ctx context.Context) (int, error) {
	if a.cfg.Store == nil {
		return 0, nil
	}
	a.mu.Lock()
	var ids []string
	for k := range a.watchers {
		if id, ok := strings.CutPrefix(k, "key:"); ok {
			ids = append(ids, id)
		}
	}
	a.mu.Unlock()
	n := 0
	var errs []error
	for _, id := range ids {
		k, err := a.cfg.Store.Key(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			errs = append(errs, fmt.Errorf("recheck key %s: %w", id, err))
			continue
		case k.Revoked == nil:
			continue
		}
		a.notify("key:" + id)
		n++
	}
	return n, errors.Join(errs...)
}
