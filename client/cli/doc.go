// Package cli is the boxwire chat client program behind client/main.go:
// Run connects, then either plays one turn (-m) and maps its outcome to an
// exit code, or runs the interactive chat loop over lines of input. It
// reads no flags or environment; main does.
package cli
