package main

import "github.com/boxwire/boxwire/client/cli"

// approvalMode maps --auto-approve and --auto-deny to cli.Options.Approvals;
// --auto-deny wins when both are given.
func approvalMode(approve, deny bool) string {
	switch {
	case deny:
		return cli.ApprovalsAutoDeny
	case approve:
		return cli.ApprovalsAutoApprove
	}
	return cli.ApprovalsAsk
}
