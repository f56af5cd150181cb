package server

import (
	"context"
	"sync"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/store"
)

// notices wakes the writers of a bridge's forwarded clients
// (forwarded.go) when the store tells of commits to their threads
// (store.Listener: PostgreSQL's LISTEN/NOTIFY). Its one listening
// goroutine starts with the first forwarded client, is counted in the
// server's connections and ends with the server. Safe for concurrent use.
type notices struct {
	s *Server
	l store.Listener

	mu        sync.Mutex
	listening bool
	subs      map[string]map[*forwarded]struct{} // by thread
}

// noticeHubs holds each server's notices (one per Server, dropped when it
// closes).
var noticeHubs = struct {
	mu sync.Mutex
	m  map[*Server]*notices
}{m: map[*Server]*notices{}}

// notices returns the server's notices over l, made on first use.
func (s *Server) notices(l store.Listener) *notices {
	noticeHubs.mu.Lock()
	defer noticeHubs.mu.Unlock()
	n := noticeHubs.m[s]
	if n == nil {
		n = &notices{s: s, l: l, subs: map[string]map[*forwarded]struct{}{}}
		noticeHubs.m[s] = n
		context.AfterFunc(s.ctx, func() {
			noticeHubs.mu.Lock()
			delete(noticeHubs.m, s)
			noticeHubs.mu.Unlock()
		})
	}
	return n
}

// serve runs the forwarded client f, with up as its first upstream, until
// it ends, its writer woken by the notices of its thread.
func (n *notices) serve(f *forwarded, up *websocket.Conn) {
	n.add(f)
	defer n.remove(f)
	f.run(up)
}

func (n *notices) add(f *forwarded) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.subs[f.thread] == nil {
		n.subs[f.thread] = map[*forwarded]struct{}{}
	}
	n.subs[f.thread][f] = struct{}{}
	if n.listening || !n.s.enter() { // a closing server: f is kicked with it
		return
	}
	n.listening = true
	go func() {
		defer n.s.conns.Done()
		_ = n.l.Listen(n.s.ctx, n.notice) // ends with the server (its error is ctx's)
	}()
}

func (n *notices) remove(f *forwarded) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.subs[f.thread], f)
	if len(n.subs[f.thread]) == 0 {
		delete(n.subs, f.thread)
	}
}

// notice wakes the forwarded clients of the notice's thread, or every one
// on a Resync (notices may have been missed).
func (n *notices) notice(no store.Notice) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if no.Resync {
		for _, fs := range n.subs {
			for f := range fs {
				f.wakeUp()
			}
		}
		return
	}
	for f := range n.subs[no.Thread] {
		f.wakeUp()
	}
}
