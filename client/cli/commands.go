package cli

import (
	"context"
	"strings"
)

// A command is one sub-command: client [flags] NAME ARGS. Its run gets the
// arguments after NAME and returns the exit code.
type command struct {
	name string
	// usage lines, each after "client [flags] ": the arguments, two
	// spaces, what it does.
	usage []string
	run   func(ctx context.Context, inv *invocation, args []string) int
}

// commands are the client's sub-commands, in the order usage lists them.
// A new sub-command is a file of its own (cmd_NAME.go) holding its run
// function, and one entry here.
var commands = []command{
	{"cp", []string{
		"cp LOCAL THREAD:PATH  copy into a thread's workspace folder (\":PATH\" for an agent)",
		"cp THREAD:PATH LOCAL  copy out of it into a local folder",
	}, runCopy},
	{"shell", []string{
		"shell [--thread ID] [--session SID] [--list] [-- CMD...]  a terminal in the sandbox (Ctrl-] q detaches)",
	}, runShell},
	{"whoami", []string{
		"whoami               who the bridge says the token (or API key) is",
	}, runWhoAmI},
	{"forward", []string{
		"forward THREAD PORT[:LOCAL]  listen on 127.0.0.1:LOCAL (default PORT) and carry each connection to PORT in the sandbox",
	}, runForward},
	{"ports", []string{
		"ports THREAD         what listens in the thread's sandbox, with its preview URLs",
	}, runPorts},
}

// lookupCommand returns the sub-command called name.
func lookupCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name && name != "" {
			return c, true
		}
	}
	return command{}, false
}

// usage is the client's usage text: the chat, then every sub-command.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: client [flags]                       interactive chat\n")
	b.WriteString("       client [flags] -m \"text\"            one turn, then exit\n")
	b.WriteString("       client [flags] --thread ID --image IMAGE  move the thread to another image, then attach\n")
	for _, c := range commands {
		for _, line := range c.usage {
			b.WriteString("       client [flags] " + line + "\n")
		}
	}
	b.WriteString("exit codes: 0 ok, 1 turn failed or some files failed, 2 usage or connection error, 130 interrupted")
	return b.String()
}
