// Package cli is the boxwire client program behind client/main.go. Main
// parses the flags, reads the environment it is given and the config
// file, and runs a sub-command (commands.go: cp, shell, whoami, each in a
// cmd_NAME.go) or the chat: Run connects, then either plays one turn (-m)
// and maps its outcome to an exit code, or runs the interactive chat loop
// over lines of input.
package cli
