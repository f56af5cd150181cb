package cli

import (
	"log/slog"
	"strings"
	"testing"
)

// The hash started beside the agent's start is the binary's, the same on
// every call.
func TestStartSelfHashIsTheBinarysHash(t *testing.T) {
	t.Parallel()
	want, err := selfHash()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(want, "sha256:") || len(want) != len("sha256:")+64 {
		t.Fatalf("selfHash = %q", want)
	}
	hash := startSelfHash(slog.New(slog.DiscardHandler))
	if got := hash(); got != want {
		t.Fatalf("startSelfHash gave %q, want %q", got, want)
	}
	if got := hash(); got != want {
		t.Fatalf("second call gave %q", got)
	}
}
