package loop

import (
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// callMerger assembles streamed tool-call deltas into whole calls. The id,
// type and name come from the first delta that carries them; argument
// fragments are concatenated and only interpreted once the stream is over.
type callMerger struct {
	calls []*mergedCall
}

type mergedCall struct {
	index int // -1 when the server sent none
	id    string
	name  string
	args  strings.Builder
}

// add folds one delta in. A delta belongs to the call with its id, else to
// the call with its index, else (no index, or a new id under a repeated
// index) it starts a new call if it carries an id or name, and otherwise
// continues the last open call.
func (m *callMerger) add(tc openai.ToolCall) {
	c := m.find(tc)
	if c == nil {
		idx := -1
		if tc.Index != nil {
			idx = *tc.Index
		}
		c = &mergedCall{index: idx}
		m.calls = append(m.calls, c)
	}
	if c.id == "" {
		c.id = tc.ID
	}
	if c.name == "" {
		c.name = tc.Function.Name
	}
	c.args.WriteString(tc.Function.Arguments)
}

func (m *callMerger) find(tc openai.ToolCall) *mergedCall {
	if tc.ID != "" {
		for _, c := range m.calls {
			if c.id == tc.ID {
				return c
			}
		}
	}
	last := m.last()
	if tc.Index != nil {
		for i := len(m.calls) - 1; i >= 0; i-- { // the latest call wins a repeated index
			if c := m.calls[i]; c.index == *tc.Index && (tc.ID == "" || c.id == "") {
				return c
			}
		}
		if tc.ID != "" || tc.Function.Name != "" {
			return nil
		}
		// A bare fragment with an index we have not seen: some servers
		// number oddly; keep it with the call being streamed.
		return last
	}
	if last != nil && tc.ID == "" && (tc.Function.Name == "" || last.name == "") {
		return last
	}
	return nil
}

func (m *callMerger) last() *mergedCall {
	if len(m.calls) == 0 {
		return nil
	}
	return m.calls[len(m.calls)-1]
}

// finish returns the merged calls in the order they started. Empty
// arguments become "{}".
func (m *callMerger) finish() []ToolCall {
	if len(m.calls) == 0 {
		return nil
	}
	out := make([]ToolCall, 0, len(m.calls))
	for _, c := range m.calls {
		args := strings.TrimSpace(c.args.String())
		if args == "" {
			args = "{}"
		}
		out = append(out, ToolCall{ID: c.id, Name: c.name, Arguments: args})
	}
	return out
}
