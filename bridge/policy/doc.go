// Package policy decides which actions of a sandbox need a person's
// approval: tool calls (by tool name and argument globs), egress hosts and
// uses of host-held credentials, each allowed, denied or asked about. It
// also holds the credentials themselves and redacts secrets from text.
//
// A Policy is loaded from a JSON file (see Load and docs/approvals.md) and
// is immutable once loaded; a thread may add rules of its own in front of
// the bridge's (WithRules). Everything here is pure and safe for
// concurrent use; nothing blocks.
package policy
