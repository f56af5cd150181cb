package wire_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

func TestRelayName(t *testing.T) {
	var b bytes.Buffer
	if err := wire.WriteRelayName(&b, "llm.sock"); err != nil {
		t.Fatal(err)
	}
	b.WriteString("rest")
	name, err := wire.ReadRelayName(&b)
	if err != nil || name != "llm.sock" {
		t.Fatalf("ReadRelayName = %q, %v", name, err)
	}
	if b.String() != "rest" {
		t.Errorf("ReadRelayName read past its line: %q left", b.String())
	}
}

func TestRelayNameRefusesBadNames(t *testing.T) {
	for _, name := range []string{"", ".sock", "../x.sock", "a/b.sock", ".hidden.sock", "llm", "LLM.sock", "x.sock\x00", strings.Repeat("a", 61) + ".sock"} {
		if wire.ValidRelayName(name) {
			t.Errorf("ValidRelayName(%q) = true", name)
		}
		if err := wire.WriteRelayName(&bytes.Buffer{}, name); !errors.Is(err, wire.ErrRelayName) {
			t.Errorf("WriteRelayName(%q) = %v, want ErrRelayName", name, err)
		}
		if _, err := wire.ReadRelayName(strings.NewReader(name + "\n")); !errors.Is(err, wire.ErrRelayName) {
			t.Errorf("ReadRelayName(%q) = %v, want ErrRelayName", name, err)
		}
	}
	if _, err := wire.ReadRelayName(strings.NewReader(strings.Repeat("a", 200))); !errors.Is(err, wire.ErrRelayName) {
		t.Errorf("an endless line: %v, want ErrRelayName", err)
	}
	if _, err := wire.ReadRelayName(strings.NewReader("llm.so")); err == nil || errors.Is(err, wire.ErrRelayName) {
		t.Errorf("a cut line: %v, want a read error", err)
	}
}
