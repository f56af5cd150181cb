package kube

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/wire"
)

// maxFolderFiles bounds the bridge folder's files carried into a pod (a
// ConfigMap holds at most 1 MiB).
const maxFolderFiles = 512 << 10

// folder is what a sandbox's bridge folder holds when it is created: the
// sockets of the bridge's proxies (carried by the tunnel) and regular
// files (the egress CA certificate, put in a ConfigMap).
type folder struct {
	sockets []string
	files   map[string]string
}

// readFolder reads the bridge folder dir (the bridge's own, which the
// sandbox cannot write) and adds the sockets env names under
// sandbox.SocketMount (a proxy that listens later still gets carried).
func readFolder(dir string, env []string) (folder, error) {
	f := folder{files: map[string]string{}}
	add := func(name string) {
		if wire.ValidRelayName(name) && !slices.Contains(f.sockets, name) {
			f.sockets = append(f.sockets, name)
		}
	}
	for _, kv := range env {
		_, v, _ := strings.Cut(kv, "=")
		if dir, name := filepath.Split(v); filepath.Clean(dir) == sandbox.SocketMount {
			add(name)
		}
	}
	if dir == "" {
		return f, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return folder{}, fmt.Errorf("read bridge folder: %w", err)
	}
	total := 0
	for _, e := range ents {
		switch {
		case e.Type()&os.ModeSocket != 0:
			add(e.Name())
		case e.Type().IsRegular():
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return folder{}, fmt.Errorf("read bridge folder: %w", err)
			}
			if total += len(data); total > maxFolderFiles {
				return folder{}, fmt.Errorf("bridge folder %s: files over %d bytes", dir, maxFolderFiles)
			}
			f.files[e.Name()] = string(data)
		}
	}
	slices.Sort(f.sockets)
	return f, nil
}

// agentSocket is the agent's socket name from its BOXWIRE_LISTEN in env
// (unix:<sandbox.AgentMount>/NAME); "agent.sock" when env names none.
func agentSocket(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "BOXWIRE_LISTEN=unix:"); ok {
			if dir, name := filepath.Split(v); filepath.Clean(dir) == sandbox.AgentMount && wire.ValidRelayName(name) {
				return name
			}
		}
	}
	return "agent.sock"
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
