// Command client is the boxwire chat client: an interactive terminal chat
// with a bridge or a standalone agent, a one-shot turn with -m, and
// sub-commands (cp, shell, whoami, …).
//
// Usage:
//
//	client [--url URL] [--token TOKEN] [--thread ID] [-m "text"]
//	client [flags] SUBCOMMAND ARGS
//
// The URL defaults to $BOXWIRE_URL, then ws://127.0.0.1:7420/v1/ws; the
// token to $BOXWIRE_TOKEN. main only wires the process to cli.Main: the
// flags, the sub-commands and the chat are package client/cli; the
// connection is client/chat, the output client/render, terminals
// client/term.
package main
