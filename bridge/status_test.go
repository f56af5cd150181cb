package main

import (
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/store"
)

// bridge status: each bridge's own lease is a row with the number of
// threads it relays; each thread's lease a row naming its relay.
func TestPrintLeases(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var out strings.Builder
	printLeases(&out, []store.Lease{
		{Thread: "bridge/b1", Holder: "b1/a1b2", Epoch: 1, Expires: now.Add(9 * time.Second)},
		{Thread: "bridge/b2", Holder: "b2/c3d4", Epoch: 3, Expires: now.Add(14 * time.Second)},
		{Thread: "t_1", Holder: "b1", Epoch: 2, Expires: now.Add(10 * time.Second)},
		{Thread: "t_2", Holder: "b1", Epoch: 1, Expires: now.Add(11 * time.Second)},
	}, now)
	got := out.String()
	for _, want := range []string{
		"b1      a1b2     2        9s",
		"b2      c3d4     0        14s",
		"t_1     b1          2      10s",
		"t_2     b1          1      11s",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	out.Reset()
	printLeases(&out, nil, now)
	if !strings.Contains(out.String(), "(none running)") {
		t.Errorf("status with no leases:\n%s", out.String())
	}
}
