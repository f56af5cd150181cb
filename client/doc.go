// Command client is the boxwire chat client: an interactive terminal chat
// with a bridge or a standalone agent, or a one-shot turn with -m.
//
// Usage:
//
//	client [--url URL] [--token TOKEN] [--thread ID] [-m "text"]
//
// The URL defaults to $BOXWIRE_URL, then ws://127.0.0.1:7420/v1/ws; the
// token to $BOXWIRE_TOKEN. The work is done by package client/cli; the
// connection by client/chat and the output by client/render.
package main
