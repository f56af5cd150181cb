package llmproxy

import (
	"encoding/json"
	"fmt"
)

// RedactedNote ends a tool message whose text the proxy masked, so the
// model knows something was taken out (%d is how many).
const RedactedNote = "\n[boxwire: %d secret(s) in this tool output were replaced by [REDACTED] before you saw it]"

// redactForModel masks Config.RedactForModel's secrets and patterns in
// the tool messages of a chat completion request, each changed one ending
// with RedactedNote. It returns body unchanged when nothing was masked or
// the messages are not in a shape it knows (the model then sees them as
// the agent sent them; clients and the log are masked apart).
func (p *Proxy) redactForModel(body []byte) ([]byte, int) {
	if p.redactModel == nil {
		return body, 0
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return body, 0
	}
	var msgs []map[string]json.RawMessage
	if json.Unmarshal(fields["messages"], &msgs) != nil {
		return body, 0
	}
	total := 0
	for _, m := range msgs {
		var role, content string
		if json.Unmarshal(m["role"], &role) != nil || role != "tool" || json.Unmarshal(m["content"], &content) != nil {
			continue // tool output comes as text; other shapes are left
		}
		red, n := p.redactModel(content)
		if n == 0 {
			continue
		}
		total += n
		m["content"], _ = json.Marshal(red + fmt.Sprintf(RedactedNote, n))
	}
	if total == 0 {
		return body, 0
	}
	var err error
	if fields["messages"], err = json.Marshal(msgs); err != nil {
		return body, 0
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return body, 0
	}
	return out, total
}
