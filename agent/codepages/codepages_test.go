package codepages

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// changed is initialized data of the binary's writable mapping, changed at
// run time: Release must leave it alone (dropping that mapping would bring
// back the file's 1).
var changed = 1

// rssFile is the RssFile line of /proc/self/status, in KiB.
func rssFile(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

func TestReleaseDropsTheBinarysCodeMappings(t *testing.T) {
	changed = 42
	// The test binary's start and the testing package have touched much
	// of its code: several MiB of it mapped.
	before := rssFile(t)
	n, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	t.Logf("released %d KiB of mappings; RssFile %d → %d KiB", n>>10, before, after)
	if n == 0 {
		t.Fatal("released nothing")
	}
	// What the reading itself and the runtime touched since maps back in
	// (in 64 KiB blocks): in a small test binary that is a large share of
	// it, so the bar is a quarter of what was released leaving the RSS.
	if before-after < n>>10/4 {
		t.Errorf("RssFile %d → %d KiB after releasing %d KiB: the binary's code is still mapped", before, after, n>>10)
	}
	if changed != 42 {
		t.Errorf("a writable mapping was dropped: changed is %d again", changed)
	}
	// Code still runs and maps back in: call the same things again.
	if _, err := Release(); err != nil {
		t.Fatal(err)
	}
}

func TestParseMaps(t *testing.T) {
	maps := "00400000-007c9000 r-xp 00000000 00:2f 1234 /usr/local/bin/boxwire-agent\n" +
		"00bcb000-00c3f000 rw-p 007cb000 00:2f 1234 /usr/local/bin/boxwire-agent\n" +
		"7fff32d47000-7fff32d68000 rw-p 00000000 00:00 0 [stack]\n" +
		"c000000000-c000400000 rw-p 00000000 00:00 0\n"
	rs, err := parseMaps([]byte(maps))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 {
		t.Fatalf("%d regions", len(rs))
	}
	if r := rs[0]; r.start != 0x400000 || r.end != 0x7c9000 || r.writable || r.inode != 1234 || r.dev != "00:2f" {
		t.Errorf("first region %+v", r)
	}
	if !rs[1].writable {
		t.Error("rw-p read as not writable")
	}
	for _, bad := range []string{"zz-10 r-xp 0 00:00 0\n", "10-zz r-xp 0 00:00 0\n", "20-10 r-xp 0 00:00 0\n", "10 r-xp 0 00:00 0\n"} {
		if _, err := parseMaps([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
