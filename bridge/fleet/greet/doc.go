// Package greet greets the agent of a sandbox for the fleet
// (bridge/fleet): it dials the agent's socket in the sandbox's folder
// without trusting the name (bridge/boxdir), exchanges hello, checks the
// posture the agent reports against a [PosturePolicy] and, for a thread,
// hands the agent its LLM proxy token in a claim, so the token never
// travels in the sandbox's environment. [Greeter.Wait] polls a new
// sandbox until its agent answers; [Greeter.Dial] greets a running one
// once. Both return the greeted connection and the [AgentBuild] the agent
// named.
//
// A Greeter keeps no state of its own and runs on its caller's goroutine;
// it is safe for concurrent use. It asks the engine ([Inspector]) only
// whether a sandbox whose agent does not answer has exited.
package greet
