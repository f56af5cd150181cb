package cli

import (
	"debug/elf"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The hash started beside the agent's start is the binary's, the same on
// every call.
func TestStartSelfHashIsTheBinarysHash(t *testing.T) {
	t.Parallel()
	want, err := selfHash()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(want, "sha256:") || len(want) != len("sha256:")+64 {
		t.Fatalf("selfHash = %q", want)
	}
	hash := startSelfHash(slog.New(slog.DiscardHandler))
	if got := hash(); got != want {
		t.Fatalf("startSelfHash gave %q, want %q", got, want)
	}
	if got := hash(); got != want {
		t.Fatalf("second call gave %q", got)
	}
}

// ownBuildID is the test binary's Go build ID, read with debug/elf (not
// the agent's own parser).
func ownBuildID(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := f.Section(".note.go.buildid")
	if sec == nil {
		t.Skip("the test binary has no .note.go.buildid section")
	}
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	// namesz, descsz, type, "Go\0\0", then the ID.
	descsz := binary.LittleEndian.Uint32(data[4:])
	return string(data[16 : 16+descsz])
}

// openSelf opens the running test binary, closed when t ends.
func openSelf(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestGoBuildIDIsTheLinkersNote(t *testing.T) {
	t.Parallel()
	f := openSelf(t)
	got, err := goBuildID(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := ownBuildID(t); got != want {
		t.Fatalf("goBuildID = %q, want %q", got, want)
	}
	if _, err := goBuildID(strings.NewReader("#!/bin/sh\necho not an ELF file, long enough for its header's 64 bytes\n")); err == nil {
		t.Error("a script: no error")
	}
}

// A hash file beside the binary is believed only for the build it names:
// the recorded value below is not the test binary's real hash, so an
// answer of it shows it came from the file.
func TestRecordedHashOnlyForTheSameBuild(t *testing.T) {
	t.Parallel()
	f := openSelf(t)
	id := ownBuildID(t)
	recorded := "sha256:" + strings.Repeat("ab", 32)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if h, ok := recordedHash(f, write("same", id+" "+recorded+"\n")); !ok || h != recorded {
		t.Errorf("the same build: %q %v, want %q", h, ok, recorded)
	}
	for name, body := range map[string]string{
		"other build":  "other/build-id " + recorded + "\n",
		"no hash":      id + "\n",
		"not sha256":   id + " md5:" + strings.Repeat("ab", 16) + "\n",
		"short digest": id + " sha256:abcd\n",
		"not hex":      id + " sha256:" + strings.Repeat("zz", 32) + "\n",
		"extra field":  id + " " + recorded + " more\n",
		"empty":        "",
	} {
		if h, ok := recordedHash(f, write(strings.ReplaceAll(name, " ", "-"), body)); ok {
			t.Errorf("%s: believed %q", name, h)
		}
	}
	if _, ok := recordedHash(f, filepath.Join(dir, "missing")); ok {
		t.Error("a missing file: believed")
	}
}

// selfHash answers from the file beside the binary when it names this
// build. Not parallel: the parallel tests, which want the real hash, run
// after it (and its file) are done.
func TestSelfHashTakesTheRecordedHash(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	recorded := "sha256:" + strings.Repeat("cd", 32)
	path := exe + hashFileSuffix
	if err := os.WriteFile(path, []byte(ownBuildID(t)+" "+recorded+"\n"), 0o644); err != nil {
		t.Skipf("cannot write beside the test binary: %v", err)
	}
	defer os.Remove(path)
	if got, err := selfHash(); err != nil || got != recorded {
		t.Fatalf("selfHash = %q, %v; want the recorded %q", got, err, recorded)
	}
}
