// Package tools holds the tools the model calls inside the sandbox: file
// tools working directly on the workspace and execute, which runs shell
// commands on a PTY.
//
// New builds the Set of tools from a Config; each tool lives in a file of its
// own and implements Tool. A tool's failure — bad arguments, a path outside
// the workspace, a command that timed out — is reported in Result.Err for the
// model to read, never as a Go error or a panic.
//
// Every path a tool takes is confined to the workspace: relative paths
// resolve against it, and paths that leave it, lexically (..) or through
// symlinks, are refused. The check guards against mistakes, not a hostile
// process racing the tool inside the same sandbox; the sandbox itself is the
// security boundary.
//
// execute runs commands through a job manager owned by the Set: a command
// that waits for terminal input, or was started with background=true, goes
// on as a background job (job_output, job_write, job_kill, jobs) until it
// ends or Set.Close kills it. Full outputs are kept as files in a bounded
// directory that read_file may read. See docs/tools.md.
package tools
