// Package tool is the contract between the agent's tools and the loop that
// calls them: Tool, Call and Result, and the helpers every tool shares to
// decode its arguments and report a failure.
//
// The file tools (agent/tools) and the command tools (agent/execute)
// implement Tool; agent/tools gathers both into the Set the loop uses and
// re-exports these types, so callers need that one import.
package tool
