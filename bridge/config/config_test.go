package config_test

import (
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/config"
	"github.com/boxwire/boxwire/bridge/fleet"
	"github.com/boxwire/boxwire/bridge/llmproxy"
	"github.com/boxwire/boxwire/bridge/sandbox/sandboxtest"
	"github.com/boxwire/boxwire/bridge/threadlog"
)

func valid() config.Config {
	return config.Config{Token: "t", Image: "img", DataDir: "/tmp/x", Manager: sandboxtest.NewFake(),
		LLM: llmproxy.Config{Upstream: "http://127.0.0.1:1/v1", APIKey: "k"}}
}

// Every bad configuration is refused with an error that names it.
func TestCheckedRefuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		change func(*config.Config)
		want   string
	}{
		{"no token", func(c *config.Config) { c.Token = "" }, "server: token is required"},
		{"no image", func(c *config.Config) { c.Image = "" }, "server: image is required"},
		{"no data dir", func(c *config.Config) { c.DataDir = "" }, "server: data dir is required"},
		{"no manager", func(c *config.Config) { c.Manager = nil }, "server: sandbox manager is required"},
		{"bad egress", func(c *config.Config) { c.Egress = []string{"a b"} }, "server: "},
		{"bad thread egress cap", func(c *config.Config) { c.EgressThreadMax = []string{"a b"} }, "server: thread egress cap: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.change(&c)
			if _, err := c.Checked(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("Checked: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCheckedDefaults(t *testing.T) {
	t.Parallel()
	c, err := valid().Checked()
	if err != nil {
		t.Fatal(err)
	}
	if c.SandboxUID != 1000 || c.SandboxGID != 1000 || c.BridgeID == "" || c.Logger == nil ||
		c.Software != "boxwire-bridge/dev" || c.LLM.HTTPClient == nil ||
		c.MaxStoredOutput != threadlog.DefaultMaxStoredOutput || c.RetentionInterval != config.DefaultRetentionInterval ||
		c.ThreadTTL != fleet.DefaultThreadTTL {
		t.Fatalf("defaults not filled: %+v", c)
	}
	set := valid()
	set.SandboxUID, set.BridgeID, set.ThreadTTL = 2000, "b1", 5
	if c, _ := set.Checked(); c.SandboxUID != 2000 || c.BridgeID != "b1" || c.ThreadTTL != 5 {
		t.Fatalf("set fields changed: %+v", c)
	}
}
