// Package term is the client's terminal: `client shell` and the chat's
// /shell open or attach a terminal session in the sandbox
// (docs/terminal.md) and relay it to the local terminal in raw mode.
//
// Conn is the protocol side: a chat.Conn to a thread that carries
// terminal control messages (JSON) and terminal bytes (binary frames),
// taking every frame through its chat.Receiver; a Handler sees output and
// messages in arrival order, and requests wait for their answers through
// chat.Conn.Request. Run is the
// interactive side: raw mode, keystrokes as input frames, SIGWINCH as
// terminal_resize, the detach keys (Ctrl-] q; Ctrl-] k closes the session)
// and the local terminal restored on every exit path — detach, remote
// exit, connection loss, signal and panic. FromChat is the chat's /shell.
//
// Goroutines: a Conn's chat.Conn owns a reader and a writer that Close
// waits for. Run starts one goroutine reading Options.In; on a file (the
// terminal) it polls before each Read and Run waits for it, so the chat
// that goes on after a /shell gets every key; a Read in progress on any
// other reader cannot be interrupted.
package term
