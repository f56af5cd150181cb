package llmscript

import (
	"fmt"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Texts answered when the script has nothing to say.
const (
	noMoreStepsText = "(script: no more steps)"
	noTurnText      = "(script: no turn matches the last user message)"
)

// answer is what one request gets: text, tool calls or an error, with the
// pacing to use.
type answer struct {
	content    string
	calls      []openai.ToolCall
	err        *Error
	delay      time.Duration
	chunkDelay time.Duration
	cutAfter   int // chunks before the stream breaks off (0: never)
}

// finishReason is the finish_reason of a completion answer.
func (a answer) finishReason() openai.FinishReason {
	if len(a.calls) > 0 {
		return openai.FinishReasonToolCalls
	}
	return openai.FinishReasonStop
}

// pick chooses the answer for a request with these messages: the turn by
// the last user message, the step by the assistant messages after it.
func (s Script) pick(msgs []openai.ChatCompletionMessage) answer {
	text, step := lastUserMessage(msgs)
	turn := s.matchTurn(text)
	if turn < 0 {
		return answer{content: noTurnText}
	}
	steps := s.Turns[turn].Steps
	if step >= len(steps) {
		return answer{content: noMoreStepsText}
	}
	st := steps[step]
	a := answer{
		content:    st.Content,
		err:        st.Error,
		delay:      time.Duration(st.DelayMS) * time.Millisecond,
		chunkDelay: time.Duration(st.ChunkDelayMS) * time.Millisecond,
		cutAfter:   st.CutAfterChunks,
	}
	for n, c := range st.ToolCalls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%d_%d_%d", turn, step, n)
		}
		a.calls = append(a.calls, openai.ToolCall{
			ID:       id,
			Type:     openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: c.Name, Arguments: c.argumentsText()},
		})
	}
	return a
}

// matchTurn returns the index of the first turn whose When is contained in
// text (case-insensitively), or -1.
func (s Script) matchTurn(text string) int {
	lower := strings.ToLower(text)
	for i, t := range s.Turns {
		if strings.Contains(lower, strings.ToLower(t.When)) {
			return i
		}
	}
	return -1
}

// lastUserMessage returns the text of the last user message and the number
// of assistant messages after it. Without a user message the text is empty
// and every assistant message counts.
func lastUserMessage(msgs []openai.ChatCompletionMessage) (string, int) {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == openai.ChatMessageRoleUser {
			last = i
			break
		}
	}
	assistants := 0
	for _, m := range msgs[last+1:] {
		if m.Role == openai.ChatMessageRoleAssistant {
			assistants++
		}
	}
	if last < 0 {
		return "", assistants
	}
	return messageText(msgs[last]), assistants
}

// messageText is the plain text of a message, joining multi-part text.
func messageText(m openai.ChatCompletionMessage) string {
	if len(m.MultiContent) == 0 {
		return m.Content
	}
	var b strings.Builder
	for _, p := range m.MultiContent {
		if p.Type == openai.ChatMessagePartTypeText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// usageFor estimates token usage at about four characters a token.
func usageFor(req openai.ChatCompletionRequest, a answer) openai.Usage {
	prompt := 0
	for _, m := range req.Messages {
		prompt += len(m.Role) + len(messageText(m)) + len(m.Name) + len(m.ToolCallID)
		prompt += callsChars(m.ToolCalls)
	}
	for _, t := range req.Tools {
		if t.Function != nil {
			prompt += len(t.Function.Name) + len(t.Function.Description)
		}
	}
	completion := len(a.content) + callsChars(a.calls)
	u := openai.Usage{PromptTokens: tokens(prompt), CompletionTokens: tokens(completion)}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

func callsChars(calls []openai.ToolCall) int {
	n := 0
	for _, c := range calls {
		n += len(c.Function.Name) + len(c.Function.Arguments)
	}
	return n
}

// tokens converts a character count to a token estimate, at least 1.
func tokens(chars int) int {
	return max(1, (chars+3)/4)
}
