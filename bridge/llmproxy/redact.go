package llmproxy

import (
	"encoding/json"
	"fmt"
	"strings"
)

// RedactedNote ends a tool message whose text the proxy masked, so the
// model knows something was taken out (%d is how many).
const RedactedNote = "\n[boxwire: %d secret(s) in this tool output were replaced by [REDACTED] before you saw it]"

// redactForModel masks Config.RedactForModel's secrets and patterns, and
// bearer (the caller's own sandbox token), in the tool messages of a chat
// completion request, each changed one ending with RedactedNote. It
// returns body unchanged when nothing was masked or the messages are not
// in a shape it knows (the model then sees them as the agent sent them;
// clients and the log are masked apart).
func (p *Proxy) redactForModel(body []byte, bearer string) ([]byte, int) {
	mask := p.maskFor(bearer)
	if mask == nil {
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
		red, n := mask(content)
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

// minTokenLen is the shortest bearer token maskFor masks: the bridge's are
// long and random; a short one would mask ordinary words.
const minTokenLen = 16

// maskFor is what redactForModel masks in one request: RedactForModel's
// secrets and, since a sandbox's token is a secret the bridge holds too,
// the token the request came with (the sandbox cannot read it, but a
// leaked one must not reach the model). Nil when there is nothing to mask.
func (p *Proxy) maskFor(bearer string) func(string) (string, int) {
	if len(bearer) < minTokenLen {
		return p.redactModel
	}
	return func(s string) (string, int) {
		n := strings.Count(s, bearer)
		if n > 0 {
			s = strings.ReplaceAll(s, bearer, "[REDACTED]")
		}
		if p.redactModel != nil {
			var more int
			s, more = p.redactModel(s)
			n += more
		}
		return s, n
	}
}
