package tools

import (
	"context"
)

// Gate returns s's tool called name with its calls passed through a new
// gate of n places in front of run instead of the tool's own Run (to
// observe how many calls run at once). For tests of the gate.
func Gate(s *Set, name string, n int, run func(Call) Result) Tool {
	t, _ := s.Lookup(name)
	return gated{runFunc{Tool: t, run: run}, make(gate, n)}
}

type runFunc struct {
	Tool
	run func(Call) Result
}

func (r runFunc) Run(_ context.Context, c Call) Result { return r.run(c) }

// GatedNames lists the names of s's gated tools.
func GatedNames(s *Set) []string {
	var names []string
	for _, t := range s.All() {
		if _, ok := t.(gated); ok {
			names = append(names, t.Name())
		}
	}
	return names
}
