package chattest

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/gorilla/websocket"
)

// Options configure a Server.
type Options struct {
	// Token, when set, is the bearer token every request must carry;
	// others are answered 401 with a JSON wire.Error.
	Token string
	// Handler serves one WebSocket connection; the connection is closed
	// when it returns. It runs on its own goroutine, which Close waits for.
	Handler func(*Peer)
	// Unix serves on a unix socket in t.TempDir(); URL is then "unix:<path>".
	Unix bool
}

// Server is a running fake server. Close (registered with t.Cleanup by New)
// closes every connection and waits for the handlers to return.
type Server struct {
	// URL is what to put in chat.Config.URL.
	URL string

	srv  *httptest.Server
	mux  *http.ServeMux
	opts Options
	wg   sync.WaitGroup

	mu     sync.Mutex
	peers  map[*Peer]struct{}
	closed bool
}

// New starts a Server on loopback (or a unix socket) and registers Close
// with t.Cleanup.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{mux: http.NewServeMux(), opts: opts, peers: map[*Peer]struct{}{}}
	s.mux.HandleFunc("GET "+wire.Path, s.serveWS)
	s.srv = httptest.NewUnstartedServer(s.auth(s.mux))
	if opts.Unix {
		path := filepath.Join(t.TempDir(), "s.sock")
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatalf("listen unix: %v", err)
		}
		s.srv.Listener.Close()
		s.srv.Listener = l
		s.URL = "unix:" + path
	}
	s.srv.Start()
	if !opts.Unix {
		s.URL = "ws://" + s.srv.Listener.Addr().String() + wire.Path
	}
	t.Cleanup(s.Close)
	return s
}

// Handle adds an HTTP route behind the same token check, e.g.
// "DELETE /v1/threads/{id}".
func (s *Server) Handle(pattern string, h http.HandlerFunc) { s.mux.HandleFunc(pattern, h) }

// WriteError answers an HTTP request with status and a JSON wire.Error.
func WriteError(w http.ResponseWriter, status int, code wire.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(wire.Error{Code: code, Message: msg})
}

func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.opts.Token {
			WriteError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "missing or wrong token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

var upgrader = websocket.Upgrader{}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(wire.MaxMessageBytes)
	p := &Peer{ws: ws}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ws.Close()
		return
	}
	s.peers[p] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		p.Close()
		s.mu.Lock()
		delete(s.peers, p)
		s.mu.Unlock()
		s.wg.Done()
	}()
	if s.opts.Handler != nil {
		s.opts.Handler(p)
	}
}

// DropAll closes every open connection abruptly (no close frame), as a
// crashed server would; handlers see their Recv fail.
func (s *Server) DropAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.peers {
		p.Close()
	}
}

// Close stops the server, closes every connection and waits for all
// handlers to return. It is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if already {
		return
	}
	s.DropAll()
	s.srv.Close()
	s.wg.Wait()
}
