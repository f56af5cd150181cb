// Package tools is the set of tools the model calls inside the sandbox:
// the file tools, which live here and work directly on the workspace, and
// the command tools (execute and the job tools) of agent/execute, which run
// shell commands on PTYs.
//
// New builds the Set of both from one Config; each file tool lives in a file
// of its own and implements Tool (agent/tool's contract, re-exported here).
// A tool's failure — bad arguments, a path outside the workspace, a command
// that timed out — is reported in Result.Err for the model to read, never as
// a Go error or a panic.
//
// Every path a file tool takes is confined to the workspace: relative paths
// resolve against it, and paths that leave it, lexically (..) or through
// symlinks, are refused. The check guards against mistakes, not a hostile
// process racing the tool inside the same sandbox; the sandbox itself is the
// security boundary.
//
// The Set owns the command tools' job manager: Set.Close kills the commands
// still running. Full outputs of commands are kept as files in a bounded
// directory that read_file may read. See docs/tools.md.
package tools
