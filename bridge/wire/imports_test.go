package wire_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/boxwire/boxwire/"

// TestOnlyWireIsShared holds the module to its import rules
// (docs/architecture.md): the agent, the bridge and the client share only
// this package and the module's top-level internal packages (which import
// nothing of ours but wire and each other), wire imports nothing of ours,
// and the bridge's lower layers never import the server above them.
func TestOnlyWireIsShared(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	component := func(pkg string) string {
		part, _, _ := strings.Cut(strings.TrimPrefix(pkg, module), "/")
		return part
	}
	lower := map[string]bool{"lease": true, "fleet": true, "agentlink": true, "threadlog": true, "sandbox": true, "store": true,
		"approval": true, "rollout": true, "users": true, "auth": true,
		"hostcheck": true, "files": true, "internal": true, "recordstore": true, "threadapi": true,
		"retention": true, "hosttools": true, "config": true, "metrics": true, "threadops": true,
		"storeopen": true, "forward": true, "failover": true, "readiness": true}
	checked := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg, imports := fields[0], fields[1:]
		rel := strings.TrimPrefix(pkg, module)
		checked++
		for _, imp := range imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			irel := strings.TrimPrefix(imp, module)
			switch {
			case rel == "bridge/wire":
				t.Errorf("%s imports %s: wire imports only the standard library", rel, irel)
			case component(pkg) == "internal" && component(imp) != "internal" && irel != "bridge/wire":
				t.Errorf("%s imports %s: a shared internal package imports only wire and internal", rel, irel)
			case (component(pkg) == "agent" || component(pkg) == "client") &&
				component(imp) != component(pkg) && irel != "bridge/wire" && component(imp) != "internal":
				t.Errorf("%s imports %s: the agent and the client share only bridge/wire and internal/", rel, irel)
			case lower[strings.Split(strings.TrimPrefix(rel, "bridge/"), "/")[0]] &&
				strings.HasPrefix(irel, "bridge/server"):
				t.Errorf("%s imports %s: a lower layer never imports the server", rel, irel)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("go list named %d packages; want the whole module", checked)
	}
}
