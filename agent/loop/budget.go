package loop

import "fmt"

// DefaultBudget is the conversation size, in approximate tokens, past
// which old tool outputs are shortened, when Config.Budget is zero.
const DefaultBudget = 100_000

// keepShortened is how much of a shortened tool output stays.
const keepShortened = 200

// tokens estimates the tokens of a text: about four characters each.
func tokens(s string) int { return (len(s) + 3) / 4 }

// messageTokens estimates a message's tokens, tool calls included.
func messageTokens(m Message) int {
	n := tokens(m.Content) + 4
	for _, c := range m.ToolCalls {
		n += tokens(c.Name) + tokens(c.Arguments) + 4
	}
	return n
}

// fitBudget returns msgs, shortened to about budget tokens if they are
// larger: the outputs of the oldest tool messages are cut to their first
// keepShortened bytes and a note, oldest first, until the estimate fits or
// only the newest step's results are left whole. msgs is not modified.
func fitBudget(msgs []Message, budget int) []Message {
	total := 0
	for _, m := range msgs {
		total += messageTokens(m)
	}
	if total <= budget {
		return msgs
	}
	// The newest step's results (after the last assistant message) stay.
	lastAssistant := len(msgs)
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleAssistant {
			lastAssistant = i
			break
		}
	}
	out := make([]Message, len(msgs))
	copy(out, msgs)
	for i := 0; i < lastAssistant && total > budget; i++ {
		m := out[i]
		if m.Role != RoleTool || len(m.Content) <= 2*keepShortened {
			continue
		}
		cut := keepShortened
		for cut > 0 && m.Content[cut]&0xC0 == 0x80 { // keep runes whole
			cut--
		}
		short := fmt.Sprintf("%s\n[older tool output shortened: %d bytes removed to keep the conversation within its budget; run the tool again if you need it]",
			m.Content[:cut], len(m.Content)-cut)
		total -= tokens(m.Content) - tokens(short)
		m.Content = short
		out[i] = m
	}
	return out
}
