package e2e_test

import (
	"testing"
)

// TestClientApproveDenyByID drives the real client binary on a terminal
// against a bridge with an approval policy: "/approve ID" typed at the
// approve? prompt lets a credential push through, "/deny ID REASON" stops
// another with the reason in the audit decision, and an id that is not
// pending (a typo at the approve? prompt, a decided request at the chat
// prompt) gets an error naming the pending ones and sends nothing.
func TestClientApproveDenyByID(t *testing.T) {
	r := newApprovalRig(t)
	p := r.e.startPTYEnv(r.e.colorEnv(t.TempDir()), "--url", r.e.bridge.url)
	p.expect("› ", startTimeout)

	before := len(r.plain.got("/plain"))
	p.send("push plain\r")
	id := p.expectApprovalID(turnTimeout)
	p.expect("approve? [y/N]", eventTimeout)
	p.send("/approve " + id + "\r")
	p.expect("approve sent for "+id, eventTimeout)
	p.expect("approval "+id+": approved by c", turnTimeout)
	p.expect("done", turnTimeout)
	got := r.plain.got("/plain")
	if len(got) != before+1 || got[len(got)-1].auth != r.secret {
		t.Fatalf("after /approve %s the server got %d requests (had %d)", id, len(got), before)
	}

	p.send("push deny\r")
	denied := p.expectApprovalID(turnTimeout)
	if denied == id {
		t.Fatalf("the second request reuses id %s", id)
	}
	p.expect("approve? [y/N]", eventTimeout)
	p.send("/deny ap_typo no\r") // not pending: nothing is sent, the prompt asks again
	p.expect(`no pending approval "ap_typo" (pending: `+denied+")", eventTimeout)
	p.expect("approve "+denied+"? [y/N]", eventTimeout)
	p.send("/deny " + denied + " not on a friday\r")
	p.expect("deny sent for "+denied, eventTimeout)
	p.expect("approval "+denied+": denied by c", turnTimeout)
	p.expect("not on a friday", eventTimeout)
	p.expect("done", turnTimeout)
	if n := len(r.plain.got("/deny")); n != 0 {
		t.Fatalf("the denied push reached the server (%d requests)", n)
	}

	p.send("/approve " + denied + "\r") // decided: nothing is sent
	p.expect(`no pending approval "`+denied+`" (none pending)`, eventTimeout)
	p.send("\x04") // Ctrl-D leaves
	if code := p.wait(eventTimeout); code != 0 {
		t.Errorf("client exited %d", code)
	}
}
