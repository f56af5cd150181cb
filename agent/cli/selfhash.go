package cli

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
)

// startSelfHash starts hashing the agent's binary (selfHash) on a
// goroutine of its own and returns what waits for the hash: when no file
// beside the binary records it, the 8 MiB take several milliseconds,
// which a new sandbox's first hello does not wait for on top of the rest
// of the agent's start. The hash is logged once known; a failure is
// logged and gives "".
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
// (wire.Hello.AgentHash); "" when it cannot be read. When the file beside
// the binary (recordedHash) records the hash of a build with this
// binary's Go build ID, that is the answer, without reading the 8 MiB.
func selfHash() (string, error) {
	exe, _ := os.Executable()
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		if exe == "" {
			return "", fmt.Errorf("agent binary: %w", err)
		}
		if f, err = os.Open(exe); err != nil {
			return "", fmt.Errorf("agent binary: %w", err)
		}
	}
	defer f.Close()
	if exe != "" {
		if h, ok := recordedHash(f, exe+hashFileSuffix); ok {
			return h, nil
		}
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash agent binary: %w", err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// hashFileSuffix names the file beside the agent's binary that records
// its hash: "<Go build ID> sha256:<hex>", one line, written by
// image/agent-hash.sh when the image is built (make agent). Hashing the
// binary took 5 ms of a new sandbox's CPU at every start, on the way to
// its first hello.
const hashFileSuffix = ".sha256"

// recordedHash returns the hash the file at path records, when the Go
// build ID it records is exe's. The build ID names the binary's contents
// (its last part is a hash of them), so another binary at the same path
// (a bind mount over the image's, a rebuild without the file) never
// matches, and is hashed as before.
func recordedHash(exe io.ReaderAt, path string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	line, err := io.ReadAll(io.LimitReader(f, 1024))
	if err != nil {
		return "", false
	}
	fields := strings.Fields(string(line))
	if len(fields) != 2 {
		return "", false
	}
	id, hash := fields[0], fields[1]
	digest, ok := strings.CutPrefix(hash, "sha256:")
	if !ok || len(digest) != 2*sha256.Size {
		return "", false
	}
	if _, err := hex.DecodeString(digest); err != nil {
		return "", false
	}
	own, err := goBuildID(exe)
	if err != nil || own != id {
		return "", false
	}
	return hash, true
}

// goBuildID reads the Go build ID of the ELF file r: the note "Go", type
// 4, that the Go linker puts in the file's first pages (what `go tool
// buildid` prints).
func goBuildID(r io.ReaderAt) (string, error) {
	var hdr [64]byte
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return "", fmt.Errorf("read ELF header: %w", err)
	}
	// ELF64, little-endian: the agent is built for amd64 and arm64.
	if string(hdr[:4]) != "\x7fELF" || hdr[4] != 2 || hdr[5] != 1 {
		return "", errors.New("not a little-endian 64-bit ELF file")
	}
	le := binary.LittleEndian
	phoff, phentsize, phnum := le.Uint64(hdr[0x20:]), uint64(le.Uint16(hdr[0x36:])), uint64(le.Uint16(hdr[0x38:]))
	if phentsize < 56 || phnum > 64 {
		return "", errors.New("malformed program headers")
	}
	ph := make([]byte, phentsize)
	for i := range phnum {
		if _, err := r.ReadAt(ph, int64(phoff+i*phentsize)); err != nil {
			return "", fmt.Errorf("read program header: %w", err)
		}
		const ptNote = 4
		if le.Uint32(ph) != ptNote {
			continue
		}
		off, size := le.Uint64(ph[8:]), le.Uint64(ph[32:])
		if size > 64<<10 {
			continue
		}
		notes := make([]byte, size)
		if _, err := r.ReadAt(notes, int64(off)); err != nil {
			return "", fmt.Errorf("read notes: %w", err)
		}
		if id, ok := goNote(notes); ok {
			return id, nil
		}
	}
	return "", errors.New("no Go build ID note")
}

// goNote finds the Go build ID note among notes: each a name size, a
// description size and a type (4 bytes each), then the name and the
// description, each padded to 4 bytes.
func goNote(notes []byte) (string, bool) {
	le := binary.LittleEndian
	pad := func(n uint64) uint64 { return (n + 3) &^ 3 }
	for len(notes) >= 12 {
		namesz, descsz, typ := uint64(le.Uint32(notes)), uint64(le.Uint32(notes[4:])), le.Uint32(notes[8:])
		notes = notes[12:]
		if pad(namesz)+pad(descsz) > uint64(len(notes)) {
			return "", false
		}
		name, desc := notes[:namesz], notes[pad(namesz):pad(namesz)+descsz]
		const goBuildIDNote = 4
		if string(name) == "Go\x00\x00" && typ == goBuildIDNote {
			return string(desc), true
		}
		notes = notes[pad(namesz)+pad(descsz):]
	}
	return "", false
}
