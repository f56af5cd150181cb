package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// createFlags are the settings of a new thread: set, they make the client
// create it through the bridge's threads API before attaching (also for
// /new), instead of letting the bridge pick its defaults.
type createFlags struct {
	image, runtime, assistant, ttl, egress, policy, mcp string
}

func (f *createFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.image, "image", "", "new threads: sandbox image (one the bridge allows); with --thread, move that thread to it")
	fs.StringVar(&f.runtime, "runtime", "", "new threads: container runtime (one the bridge allows, e.g. runsc)")
	fs.StringVar(&f.assistant, "assistant", "", "new threads: share this assistant's sandbox (assistant scope)")
	fs.StringVar(&f.ttl, "ttl", "", "new threads: sandbox idle time to live, e.g. 10m (can only shorten the bridge's)")
	fs.StringVar(&f.egress, "egress", "", "new threads: extra egress rules, comma-separated (within the bridge's --egress-thread-max)")
	fs.StringVar(&f.policy, "policy", "", "new threads: approval policy file (JSON rules) checked before the bridge's")
	fs.StringVar(&f.mcp, "mcp", "", "new threads: MCP servers file (the schema of the image's /etc/boxwire/mcp.json) the agent runs in the sandbox beside the image's")
}

// request is the create_thread request the flags ask for, or nil when
// none is set (the bridge's defaults, created on attach).
func (f *createFlags) request() (*wire.CreateThread, error) {
	if *f == (createFlags{}) {
		return nil, nil
	}
	req := &wire.CreateThread{Image: f.image, Runtime: f.runtime, TTL: f.ttl}
	if f.assistant != "" {
		req.Scope, req.Assistant = wire.ScopeAssistant, f.assistant
	}
	if f.ttl != "" {
		if _, err := time.ParseDuration(f.ttl); err != nil {
			return nil, fmt.Errorf("--ttl %q: %w", f.ttl, err)
		}
	}
	for _, r := range strings.Split(f.egress, ",") {
		if r = strings.TrimSpace(r); r != "" {
			req.Egress = append(req.Egress, r)
		}
	}
	var err error
	if req.Policy, err = jsonFile("--policy", f.policy); err != nil {
		return nil, err
	}
	if req.MCP, err = jsonFile("--mcp", f.mcp); err != nil { // the bridge checks it
		return nil, err
	}
	return req, nil
}

// jsonFile reads the JSON file a flag names; nil when it names none.
func jsonFile(flag, path string) (json.RawMessage, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("%s %s: not JSON", flag, path)
	}
	return json.RawMessage(data), nil
}

// moveImage is the image to move an existing thread to: --image when it is
// the only new-thread flag set, else "".
func (f *createFlags) moveImage() string {
	if f.image != "" && *f == (createFlags{image: f.image}) {
		return f.image
	}
	return ""
}

// approvalMode maps --auto-approve and --auto-deny to Options.Approvals;
// --auto-deny wins when both are given.
func approvalMode(approve, deny bool) string {
	switch {
	case deny:
		return ApprovalsAutoDeny
	case approve:
		return ApprovalsAutoApprove
	}
	return ApprovalsAsk
}
