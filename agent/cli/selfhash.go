package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

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
