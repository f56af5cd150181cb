package render

import "strings"

// Markdown styles (Color only).
const (
	styleHeading = "\x1b[1;36m" // bold cyan
	styleCode    = "\x1b[33m"   // yellow: code spans and fenced code
	styleQuote   = "\x1b[2;3m"  // dim italic
)

// markdown styles streamed assistant text for a terminal, a line at a time
// but without waiting for whole lines: text is emitted as soon as its style
// is certain. The start of a line is held until its kind (heading, fence,
// list item, quote, rule) is known; an inline span (`code`, **bold**) is
// held from its opening marker until it closes, and is written literally
// when the line ends first. Its output does not depend on how the text was
// split into chunks.
type markdown struct {
	cur     string // the current line's text not yet written
	kind    lineKind
	inFence bool
	fence   string // the opening fence's marker (``` or ~~~) while inFence
}

// lineKind is what the start of the current line turned out to be.
type lineKind int

const (
	kindUnknown lineKind = iota // not enough text yet
	kindText                    // a paragraph, list item or quote: inline styles apply
	kindHeading
	kindCode  // a line inside a fenced block
	kindWhole // a fence or a rule: written when the line ends
)

// feed takes a chunk of assistant text and returns what can be written now.
func (m *markdown) feed(s string) string {
	var out strings.Builder
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			m.cur += s
			out.WriteString(m.emit(false))
			return out.String()
		}
		m.cur += s[:i]
		out.WriteString(m.emit(true))
		out.WriteString("\n")
		s = s[i+1:]
	}
	return out.String()
}

// flush writes what is held, as if the line ended (without a newline),
// and closes an open fence: the message is over.
func (m *markdown) flush() string {
	out := ""
	if m.cur != "" || m.kind != kindUnknown {
		out = m.emit(true)
	}
	m.inFence = false
	return out
}

// pending says some text is held.
func (m *markdown) pending() bool { return m.cur != "" }

// emit writes what is certain of m.cur; eol says the line is complete, in
// which case the line state is reset.
func (m *markdown) emit(eol bool) string {
	var out string
	if m.kind == kindUnknown {
		out = m.classify(eol)
	}
	switch m.kind {
	case kindCode:
		out += paint(styleCode, m.cur)
		m.cur = ""
	case kindText, kindHeading:
		base := ""
		if m.kind == kindHeading {
			base = styleHeading
		}
		text, rest := inline(m.cur, base, eol)
		out += text
		m.cur = rest
	case kindWhole:
		if eol {
			out += m.whole()
			m.cur = ""
		}
	}
	if eol {
		m.kind, m.cur = kindUnknown, ""
	}
	return out
}

// classify decides the kind of the current line once enough of it is
// known, consuming (and rendering) its marker; it returns the marker's
// rendering.
func (m *markdown) classify(eol bool) string {
	trimmed := strings.TrimLeft(m.cur, " ")
	indent := m.cur[:len(m.cur)-len(trimmed)]
	if !eol && (trimmed == "" || len(indent) > 3) && !m.inFence {
		if len(indent) > 3 {
			m.kind = kindText
		}
		return ""
	}
	if m.inFence {
		if strings.HasPrefix(trimmed, m.fence) {
			m.kind = kindWhole
			return ""
		}
		if eol || !strings.HasPrefix(m.fence, trimmed) {
			m.kind = kindCode
		}
		return ""
	}
	switch {
	case !eol && (strings.HasPrefix("```", trimmed) || strings.HasPrefix("~~~", trimmed)):
		return "" // "`" or "``" so far: a fence or a code span
	case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
		m.kind = kindWhole
		return ""
	case isRulePrefix(trimmed) && !eol:
		return "" // "-", "--", "**": a rule, a list item or bold text
	case isRule(trimmed):
		m.kind = kindWhole
		return ""
	}
	if n := headingLevel(trimmed, eol); n > 0 {
		m.kind, m.cur = kindHeading, strings.TrimLeft(trimmed[n:], " ")
		return indent
	} else if n < 0 {
		return "" // "##" so far
	}
	m.kind = kindText
	for _, b := range []string{"- ", "* ", "+ "} {
		if strings.HasPrefix(trimmed, b) {
			m.cur = trimmed[2:]
			return indent + "• "
		}
	}
	if trimmed == ">" && !eol {
		m.kind = kindUnknown // is a space coming?
		return ""
	}
	if strings.HasPrefix(trimmed, ">") {
		m.cur = strings.TrimPrefix(trimmed[1:], " ")
		return indent + paint(styleDim, "│ ")
	}
	if !eol && len(trimmed) < 2 && strings.ContainsAny(trimmed, "-*+>#") {
		m.kind = kindUnknown // wait for the character after the marker
	}
	return ""
}

// whole renders a complete fence or rule line and updates the fence state.
func (m *markdown) whole() string {
	t := strings.TrimSpace(m.cur)
	switch {
	case m.inFence:
		m.inFence = false
		return paint(styleDim, m.cur)
	case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
		m.inFence, m.fence = true, t[:3]
		return paint(styleDim, m.cur)
	default:
		return paint(styleDim, strings.Repeat("─", 40))
	}
}

// headingLevel is the length of a heading marker ("## ") at the start of
// s, 0 when s is not a heading, and -1 when it cannot tell yet.
func headingLevel(s string, eol bool) int {
	n := 0
	for n < len(s) && s[n] == '#' {
		n++
	}
	switch {
	case n == 0 || n > 6:
		return 0
	case n == len(s) && !eol:
		return -1
	case n == len(s) || s[n] == ' ':
		return n
	}
	return 0
}

// isRulePrefix says s could still become a rule ("---", "***", "___").
func isRulePrefix(s string) bool {
	s = strings.TrimRight(s, " ")
	return s != "" && len(s) < 3 && strings.Trim(s, string(s[0])) == "" && strings.ContainsAny(s[:1], "-*_")
}

func isRule(s string) bool {
	s = strings.ReplaceAll(strings.TrimSpace(s), " ", "")
	return len(s) >= 3 && strings.ContainsAny(s[:1], "-*_") && strings.Trim(s, s[:1]) == ""
}

// inline renders s with code spans and bold in base style. It returns the
// rendering of what is certain and the rest to hold: from an opening
// marker whose closer has not arrived yet, or a trailing "*" that may
// start one. At eol nothing is held and unclosed markers stay literal.
func inline(s, base string, eol bool) (string, string) {
	var out strings.Builder
	text := func(t string) { out.WriteString(paint(base, t)) }
	for s != "" {
		i := strings.IndexAny(s, "`*")
		if i < 0 {
			text(s)
			return out.String(), ""
		}
		text(s[:i])
		s = s[i:]
		marker, style := "`", styleCode
		if s[0] == '*' {
			if len(s) == 1 && !eol {
				return out.String(), s
			}
			if !strings.HasPrefix(s, "**") {
				text("*")
				s = s[1:]
				continue
			}
			marker, style = "**", styleBold+base
		}
		end := strings.Index(s[len(marker):], marker)
		switch {
		case end > 0:
			out.WriteString(paint(style, s[len(marker):len(marker)+end]))
			s = s[2*len(marker)+end:]
		case !eol:
			return out.String(), s
		default:
			text(marker)
			s = s[len(marker):]
		}
	}
	return out.String(), ""
}

// paint wraps s in style, or returns it as is when style or s is empty.
func paint(style, s string) string {
	if style == "" || s == "" {
		return s
	}
	return style + s + styleReset
}
