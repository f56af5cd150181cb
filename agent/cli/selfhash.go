package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
)

// startSelfHash starts hashing the agent's binary (selfHash) on a
// goroutine of its own and returns what waits for the hash: the 8 MiB
// take several milliseconds, which a new sandbox's first hello no longer
// waits for on top of the rest of the agent's start. The hash is logged
// once known; a failure is logged and gives "".
func startSelfHash(log *slog.Logger) func() string {
	done := make(chan struct{})
	var hash string
	go func() {
		defer close(done)
		h, err := selfHash()
		if err != nil {
			log.Warn("agent binary hash", "err", err)
			return
		}
		hash = h
		log.Info("agent binary", "hash", h)
	}()
	return sync.OnceValue(func() string {
		<-done
		return hash
	})
}

// selfHash is the SHA-256 of the binary this process runs, "sha256:<hex>",
// read from /proc/self/exe (the file the kernel started, even when a bind
// mount put it over the image's, bridge --agent-binary), or from
// os.Executable where /proc is not there. The agent names it in its hello
// (wire.Hello.AgentHash); "" when it cannot be read.
func selfHash() (string, error) {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		exe, xerr := os.Executable()
		if xerr != nil {
			return "", fmt.Errorf("agent binary: %w", err)
		}
		if f, err = os.Open(exe); err != nil {
			return "", fmt.Errorf("agent binary: %w", err)
		}
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash agent binary: %w", err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
