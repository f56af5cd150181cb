package tools_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/agent/tools"
)

func TestSetListsToolsSorted(t *testing.T) {
	set := tools.New(tools.Config{})
	var names []string
	for _, tool := range set.All() {
		names = append(names, tool.Name())
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(tool.Parameters(), &schema); err != nil {
			t.Errorf("%s: parameters are not JSON: %v", tool.Name(), err)
		}
		if schema.Type != "object" || schema.Properties == nil {
			t.Errorf("%s: schema = %+v", tool.Name(), schema)
		}
		for _, r := range schema.Required {
			if _, ok := schema.Properties[r]; !ok {
				t.Errorf("%s: required %q has no property", tool.Name(), r)
			}
		}
		if tool.Description() == "" {
			t.Errorf("%s: no description", tool.Name())
		}
		if got, ok := set.Lookup(tool.Name()); !ok || got != tool {
			t.Errorf("Lookup(%q) = %v, %v", tool.Name(), got, ok)
		}
	}
	want := []string{"delete", "edit_file", "execute", "glob", "grep", "job_kill", "job_output",
		"job_write", "jobs", "ls", "read_file", "write_file"}
	if !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
	if _, ok := set.Lookup("nope"); ok {
		t.Error("Lookup(nope) found a tool")
	}
	if exec, _ := set.Lookup("execute"); !strings.Contains(exec.Description(), tools.DefaultWorkspace) {
		t.Error("execute's description does not name the default workspace")
	}
}

func TestArgumentErrors(t *testing.T) {
	set, _ := newSet(t, tools.Config{})
	tests := []struct {
		tool, args, want string
	}{
		{"execute", `{"command": 1}`, "invalid arguments"},
		{"execute", `not json`, "invalid arguments"},
		{"execute", `{}`, `missing required argument "command"`},
		{"execute", ``, `missing required argument "command"`},
		{"execute", `{"command": "true", "timeout": 0}`, "timeout must be"},
		{"read_file", `{}`, `missing required argument "path"`},
		{"read_file", `{"path": "x", "offset": -1}`, "offset must be"},
		{"read_file", `{"path": "x", "limit": 0}`, "limit must be"},
		{"read_file", `[1,2]`, "invalid arguments"},
		{"write_file", `{"path": "x"}`, `missing required argument "content"`},
		{"write_file", `{"content": "x"}`, `missing required argument "path"`},
		{"write_file", `{"path": "", "content": "x"}`, "path is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			res := call(t, set, tt.tool, json.RawMessage(tt.args))
			if !strings.Contains(res.Err, tt.want) {
				t.Errorf("Err = %q, want it to contain %q", res.Err, tt.want)
			}
		})
	}
}
