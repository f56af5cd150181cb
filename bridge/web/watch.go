package web

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// A connection a browser session opened (a WebSocket: the chat, a
// forwarded client) ends with the session: at its logout, its expiry, its
// eviction, and — a logout through another bridge on a shared store — at
// the next Recheck. bridge/users asks for it (users.Config.Sessions).

// SessionOf returns the key of the browser session r is authenticated by
// (Authenticate: its cookie, when r has no Authorization header), or ""
// for a request of a bearer credential or none.
func (s *Sessions) SessionOf(r *http.Request) string {
	if r.Header.Get("Authorization") != "" {
		return ""
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return ""
	}
	return sessionKey(c.Value)
}

// WatchSession calls end once the session under key (SessionOf) ends;
// right away, on a goroutine of its own, when it has ended already. end
// is called with the sessions' lock held and must not block; stop ends
// the watch (a call of end may still be on its way when the expiry's
// timer fired just then).
func (s *Sessions) WatchSession(key string, end func()) (stop func()) {
	st := s.table
	st.mu.Lock()
	defer st.mu.Unlock()
	ss := st.m[key]
	if ss == nil || ss.ended {
		go end()
		return func() {}
	}
	if ss.watchers == nil {
		ss.watchers = map[int]func(){}
	}
	id := ss.nextWatch
	ss.nextWatch++
	ss.watchers[id] = end
	expiry := time.AfterFunc(time.Until(ss.Expires), func() { st.expire(key, ss) })
	return func() {
		expiry.Stop()
		st.mu.Lock()
		defer st.mu.Unlock()
		delete(ss.watchers, id)
	}
}

// Recheck, on a shared store, reads again each session this bridge holds
// that has a watched connection, and ends those the store has no more
// (logged out through another bridge): their connections end as at a
// logout here. It returns how many sessions ended.
func (s *Sessions) Recheck(ctx context.Context) (int, error) {
	st := s.table
	if st.shared == nil {
		return 0, nil
	}
	st.mu.Lock()
	var keys []string
	for k, ss := range st.m {
		if len(ss.watchers) > 0 {
			keys = append(keys, k)
		}
	}
	st.mu.Unlock()
	ended := 0
	for _, k := range keys {
		_, ok, err := st.shared.WebSession(ctx, k)
		if err != nil {
			return ended, fmt.Errorf("recheck browser sessions: %w", err)
		}
		if !ok {
			if _, known := st.recheck(k, false, time.Now()); !known {
				ended++
			}
		}
	}
	return ended, nil
}
