// Package sandboxtest is a fake [sandbox.Manager] for the tests of the
// packages above bridge/sandbox (bridge/fleet, bridge/server), in the
// manner of net/http/httptest: its sandboxes are in-process fake agents
// serving on <AgentDir>/agent.sock, as the real agent does in its folder.
//
// An [Agent] speaks the agent's side of the bridge's greeting: it answers a
// bridge's hello and takes the claim (its LLM token), answering claimed;
// every other message goes to the test's answer function. A test that
// needs more of an agent wraps Agent in a type of its own and makes the
// [Manager] start that type ([NewManager]); [NewFake] starts plain Agents.
//
// A Manager keeps the sandboxes, volumes and removals it saw, for the
// test to look at ([Manager.State], [Manager.Live]), and can fail or empty
// the next creations ([Manager.SetCreateErr], [Manager.SetNoAgent]). It
// is safe for concurrent use. The package is for _test files only.
package sandboxtest
