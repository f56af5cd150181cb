// Package codepages gives back the page-table mappings of the agent's own
// binary once the agent has started.
//
// Starting a Go program runs code all over its binary: every package's
// init, the runtime's set-up, the flag and option parsing, the first
// listen. Each first touch of a page of the binary is a page fault, and
// the kernel answers one by mapping the pages around it that are already
// in the page cache (fault-around, 64 KiB a fault on Debian's kernels), so
// the agent's start leaves about 7 MiB of its 8.6 MiB binary mapped in its
// resident set, most of it code it never runs again. Release drops those
// mappings (madvise MADV_DONTNEED on the binary's read-only mappings): the
// pages stay in the page cache, shared by every sandbox of the image, and
// code the agent runs afterwards is mapped again on its first touch (a
// minor fault, no read from disk while the page cache holds it).
//
// What it does not change: the page cache the binary takes on the host
// (once for all sandboxes of an image), and the agent's anonymous memory
// (its heap, stacks and data), which is what each further sandbox costs.
// What it changes: the agent's RSS counts the code it uses, not the code
// its start touched once, and the kernel can reclaim that start-up code
// under memory pressure like any page cache no process maps.
package codepages

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"reflect"
	"strconv"

	"golang.org/x/sys/unix"
)

// Release drops the process's page-table mappings of its binary's
// read-only segments (code, read-only data, the function tables) and
// returns how many bytes of mappings it advised. Writable mappings of the
// binary (initialized data: dropping them would lose the program's
// changes to it) and every other mapping are left alone. Safe to call at
// any time and from any goroutine: code in the dropped range that runs
// meanwhile faults its pages back.
func Release() (int, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("release code pages: %w", err)
	}
	regions, err := parseMaps(maps)
	if err != nil {
		return 0, fmt.Errorf("release code pages: %w", err)
	}
	here := uint64(reflect.ValueOf(Release).Pointer()) // an address in the binary's code
	var binary *region
	for i := range regions {
		if regions[i].start <= here && here < regions[i].end {
			binary = &regions[i]
			break
		}
	}
	if binary == nil || binary.inode == 0 {
		return 0, fmt.Errorf("release code pages: the code at %#x is in no file mapping", here)
	}
	released := 0
	for _, r := range regions {
		if r.inode != binary.inode || r.dev != binary.dev || r.writable {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(r.start), uintptr(r.end-r.start), unix.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("release code pages %#x-%#x: %w", r.start, r.end, errno)
		}
		released += int(r.end - r.start)
	}
	return released, nil
}

// region is one line of /proc/self/maps.
type region struct {
	start, end uint64
	writable   bool
	dev        string
	inode      uint64
}

// parseMaps reads the lines of /proc/<pid>/maps: "start-end perms offset
// dev inode [path]".
func parseMaps(b []byte) ([]region, error) {
	var out []region
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 5 {
			continue
		}
		span, perms := f[0], f[1]
		lo, hi, ok := bytes.Cut(span, []byte("-"))
		if !ok {
			return nil, fmt.Errorf("maps line %q: no address range", sc.Text())
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		inode, err3 := strconv.ParseUint(string(f[4]), 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || end < start || len(perms) < 2 {
			return nil, fmt.Errorf("maps line %q: malformed", sc.Text())
		}
		out = append(out, region{start: start, end: end, writable: perms[1] == 'w', dev: string(f[3]), inode: inode})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
