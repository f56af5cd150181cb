// Package execute runs the sandbox's shell commands on PTYs for the model:
// the execute tool and the job tools (job_output, job_write, job_kill,
// jobs) over one job manager.
//
// A Runner, made by New, owns the commands. execute starts each on a PTY
// (agent/shell) as a login shell — a spare one started ahead of time when
// one is ready (spare.go) — with an environment built from scratch
// (env.go), streams its raw output, and gives the model cleaned (clean.go),
// capped (capture.go) text, keeping the full output as a file in a bounded
// directory (outdir.go). A command that waits for terminal input, or was
// started with background=true, goes on as a background job until it ends
// or Runner.Close kills it.
//
// The shell remembers (shellstate.go): unless a call asks for a fresh
// shell, the working directory and exported variables a command leaves
// carry over to the next command of the same thread (WithThread).
//
// The tools implement agent/tool's Tool; agent/tools gathers them with the
// file tools into the Set the loop uses. See docs/tools.md.
package execute
