//go:build boxwire_pprof

package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"strconv"
	"syscall"
)

// A bridge built with -tags boxwire_pprof (the benchmarks' build, never a
// release: make bench with BOXWIRE_BENCH_PROFILE) serves net/http/pprof on
// the unix socket BOXWIRE_PPROF_SOCKET names, made with mode 0600 so only
// the user the bridge runs as (its operator) reaches it. Without the
// variable nothing is served. The listener lives as long as the process.
// BOXWIRE_PPROF_MEMRATE sets runtime.MemProfileRate (1: every allocation
// is in the heap profile; the default samples one per 512 KiB).
func init() {
	path := os.Getenv("BOXWIRE_PPROF_SOCKET")
	if path == "" {
		return
	}
	if n, err := strconv.Atoi(os.Getenv("BOXWIRE_PPROF_MEMRATE")); err == nil && n > 0 {
		runtime.MemProfileRate = n
	}
	_ = os.Remove(path)
	old := syscall.Umask(0o177) // at init no other goroutine makes files
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pprof: listen on %s: %v\n", path, err)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = http.Serve(ln, mux) }() // until the process exits
}
