// Package terminal keeps the agent's interactive terminal sessions: PTY
// processes (agent/shell) that people open, attach to, type into, resize,
// signal and close over the wire protocol (docs/terminal.md).
//
// A Session outlives the connections that watch it: it ends when it is
// closed, when it has been idle without watchers for Config.IdleTimeout, or
// when the Registry closes (the sandbox ends). Every byte the process writes
// goes through a VT emulator (github.com/charmbracelet/x/vt) that keeps the
// current screen, so that a watcher that attaches gets a fresh rendering of
// the screen (Screen) and then the live output, never a raw replay.
//
// Watchers are Sinks. Output is offered to each Sink as encoded binary
// frames; a Sink never blocks. While every watcher is full the PTY reader
// waits (the fastest watcher paces the program, as a real terminal does),
// woken when a watcher has room again (bridge/wire.Fanout: the Sink wakes
// the Waker it was given to Watch), never polling; a watcher that stays
// full while another keeps up, or while nobody takes anything for
// Config.StallLimit, is detached with reason too_slow and may attach again
// for a fresh screen.
//
// Goroutines: the Registry owns an idle reaper, and each Session a waiter
// for its process and a drain for the emulator's answer pipe; Close on the
// Registry stops them all and waits for them.
package terminal
