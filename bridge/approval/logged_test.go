package approval_test

import (
	"context"
	"errors"
	"testing"

	"github.com/boxwire/boxwire/bridge/approval"
	"github.com/boxwire/boxwire/bridge/wire"
)

// eventLog is a thread's stored log for LoggedIn; err fails every read.
type eventLog struct {
	evs []wire.Envelope
	err error
}

func (l eventLog) Events(_ string, after uint64, limit int) ([]wire.Envelope, error) {
	var out []wire.Envelope
	for _, env := range l.evs {
		if env.Seq > after && len(out) < limit {
			out = append(out, env)
		}
	}
	return out, l.err
}

func TestLoggedIn(t *testing.T) {
	t.Parallel()
	var l eventLog
	for i := range 600 { // more than one batch before the one looked for
		env := wire.MustNew(wire.TypeAssistantDelta, "t1", "", wire.Text{Text: "x"})
		if i == 550 {
			env = wire.MustNew(wire.TypeApprovalRequest, "t1", "", map[string]string{"approval_id": "ap_1"})
		}
		env.Seq = uint64(i + 1)
		l.evs = append(l.evs, env)
	}
	logged := approval.LoggedIn(l, "t1", nil)
	for _, tc := range []struct {
		after uint64
		typ   wire.Type
		id    string
		want  bool
	}{
		{0, wire.TypeApprovalRequest, "ap_1", true},
		{550, wire.TypeApprovalRequest, "ap_1", true}, // it is seq 551
		{551, wire.TypeApprovalRequest, "ap_1", false},
		{0, wire.TypeApprovalDecision, "ap_1", false},
		{0, wire.TypeApprovalRequest, "ap_2", false},
	} {
		if got := logged(context.Background(), tc.after, tc.typ, tc.id); got != tc.want {
			t.Errorf("logged(after %d, %s, %s) = %v; want %v", tc.after, tc.typ, tc.id, got, tc.want)
		}
	}
	if !approval.LoggedIn(eventLog{err: errors.New("store down")}, "t1", nil)(context.Background(), 0, wire.TypeApprovalRequest, "ap_1") {
		t.Error("a log that cannot be read: want yes (a request twice in the log is what restoring must not do)")
	}
}
