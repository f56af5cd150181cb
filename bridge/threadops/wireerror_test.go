package threadops_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/sandbox"
	"github.com/boxwire/boxwire/bridge/threadops"
	"github.com/boxwire/boxwire/bridge/wire"
)

func TestWireError(t *testing.T) {
	t.Parallel()
	own := wire.Error{Code: wire.CodeNotAllowed, Message: "image not allowed"}
	cases := []struct {
		err  error
		want wire.Error
	}{
		{fmt.Errorf("create: %w", own), own},
		{fleet.ErrLimit, wire.Error{Code: wire.CodeSandboxLimit, Message: fleet.ErrLimit.Error()}},
		{fmt.Errorf("x: %w", fleet.ErrClosing), wire.Error{Code: wire.CodeInternal, Message: "x: " + fleet.ErrClosing.Error()}},
		{fmt.Errorf("list: %w", sandbox.ErrEngineUnavailable), wire.Error{Code: wire.CodeEngineUnavailable,
			Message: "the bridge cannot reach the container engine: list: " + sandbox.ErrEngineUnavailable.Error()}},
		{errors.New("boom"), wire.Error{Code: wire.CodeSandboxUnavailable, Message: "could not start a sandbox: boom"}},
	}
	for _, tc := range cases {
		if got := threadops.WireError(tc.err); got != tc.want {
			t.Errorf("WireError(%v) = %+v, want %+v", tc.err, got, tc.want)
		}
	}
}
