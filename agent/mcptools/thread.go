package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"

	"github.com/boxwire/boxwire/agent/tool"
	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/internal/mcpclient"
)

// MaxThreadSets is how many threads keep the servers they declare
// running at once: when one more thread's start, the least recently used
// thread's are ended (they start again at its next turn).
const MaxThreadSets = 8

// errEnded is a call's error on a thread's servers that were ended.
var errEnded = errors.New("the thread's MCP servers were ended (too many threads declare some, or its declaration changed); the next turn starts them again")

// threadSets are the servers the threads declare, by thread.
type threadSets struct {
	mu     sync.Mutex
	closed bool
	sets   map[string]*threadSet
	clock  uint64 // counts uses, for least recently used
}

// threadSet is one thread's servers and the declaration they are of.
type threadSet struct {
	key     string // the declaration as JSON
	servers *Servers
	used    uint64
}

// ForThread returns the tools of the MCP servers thread declares — decl,
// from the bridge's host_tools answer (wire.HostTools.MCPServers) — run
// like the image's: started on first use (again after they ended) with
// the same environment and working directory, as the sandbox's user. A
// server named like one of the image's is skipped (the image's is used),
// and so is one whose declaration does not check; both are logged. A
// thread's servers are kept while its declaration stays the same; a
// changed or empty one ends them. At most MaxThreadSets threads keep
// theirs running. It blocks like Tools.
func (s *Servers) ForThread(ctx context.Context, thread string, decl []wire.MCPServer) []tool.Tool {
	set, ended := s.threadSet(thread, decl)
	for _, e := range ended {
		e.Close()
	}
	if set == nil {
		return nil
	}
	return set.Tools(ctx)
}

// threadSet returns thread's servers for decl (nil for none), making
// them when they are new, and the sets it let go, for the caller to close.
func (s *Servers) threadSet(thread string, decl []wire.MCPServer) (*Servers, []*Servers) {
	key := ""
	if len(decl) > 0 {
		raw, _ := json.Marshal(decl) // plain data: never fails
		key = string(raw)
	}
	ts := &s.threads
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.closed {
		return nil, nil
	}
	ts.clock++
	var ended []*Servers
	if cur := ts.sets[thread]; cur != nil {
		if cur.key == key {
			cur.used = ts.clock
			return cur.servers, nil
		}
		ended = append(ended, cur.servers)
		delete(ts.sets, thread)
	}
	if key == "" {
		return nil, ended
	}
	for len(ts.sets) >= MaxThreadSets {
		oldest := ""
		for id, set := range ts.sets {
			if oldest == "" || set.used < ts.sets[oldest].used {
				oldest = id
			}
		}
		s.log.Info("MCP servers of a thread ended: more threads declare some than are kept running", "thread", oldest, "kept", MaxThreadSets)
		ended = append(ended, ts.sets[oldest].servers)
		delete(ts.sets, oldest)
	}
	log := s.log.With("thread", thread)
	set := &threadSet{key: key, used: ts.clock, servers: newServers(Config{
		Servers: s.threadServers(decl, log), Env: s.cfg.Env, Dir: s.cfg.Dir, OutputLimit: s.cfg.OutputLimit, Logger: log,
	}, errEnded)}
	if ts.sets == nil {
		ts.sets = map[string]*threadSet{}
	}
	ts.sets[thread] = set
	return set.servers, ended
}

// threadServers checks a thread's declaration: a server that does not
// check, or whose name the image's servers or an earlier one of the
// thread's has, is logged and left out.
func (s *Servers) threadServers(decl []wire.MCPServer, log *slog.Logger) []Server {
	var out []Server
	for _, d := range decl {
		c, err := mcpclient.Check(d)
		switch {
		case err != nil:
			log.Warn("an MCP server the thread declares is left out", "mcp_server", d.Name, "err", err)
			continue
		case slices.ContainsFunc(s.cfg.Servers, func(img Server) bool { return img.Name == d.Name }):
			log.Warn("an MCP server the thread declares has the name of one the image declares; the image's is used", "mcp_server", d.Name)
			continue
		case slices.ContainsFunc(out, func(o Server) bool { return o.Name == d.Name }):
			log.Warn("an MCP server the thread declares twice is used once", "mcp_server", d.Name)
			continue
		}
		out = append(out, c)
	}
	return out
}

// close ends every thread's servers and refuses new ones.
func (ts *threadSets) close() {
	ts.mu.Lock()
	ts.closed = true
	sets := ts.sets
	ts.sets = nil
	ts.mu.Unlock()
	for _, set := range sets {
		set.servers.Close()
	}
}
