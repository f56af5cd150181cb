package execute

import (
	"strconv"
	"strings"
)

// parseExports reads what bash's export -p prints — one
// `declare -FLAGS NAME="value"`, `declare -FLAGS NAME=$'value'` or
// `declare -FLAGS NAME` (exported, no value) per variable — into a map,
// leaving out the shell's own variables and those without a value. ok is
// false when the text is not of that form (an exported array, say).
func parseExports(text string) (vars map[string]string, ok bool) {
	vars = map[string]string{}
	for text != "" {
		rest, found := strings.CutPrefix(text, "declare -")
		if !found {
			return nil, false
		}
		_, rest, found = strings.Cut(rest, " ") // the flags
		if !found {
			return nil, false
		}
		n := 0
		for n < len(rest) && isNameByte(rest[n], n) {
			n++
		}
		name, rest := rest[:n], rest[n:]
		if name == "" {
			return nil, false
		}
		var value string
		hasValue := strings.HasPrefix(rest, "=")
		if hasValue {
			if value, rest, ok = bashWord(rest[1:]); !ok {
				return nil, false
			}
		}
		if rest != "" && rest[0] != '\n' {
			return nil, false
		}
		text = strings.TrimPrefix(rest, "\n")
		if hasValue && !shellOwnVars[name] {
			vars[name] = value
		}
	}
	return vars, true
}

func isNameByte(c byte, i int) bool {
	return c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9'
}

// bashWord decodes a value as declare -p quotes it, "…" (\ before " \ $ `)
// or $'…' (ANSI-C escapes), and returns it and the text after it.
func bashWord(s string) (value, rest string, ok bool) {
	if len(s) > 0 && s[0] == '"' {
		// Most values have nothing escaped: they are the text up to the quote.
		if i := strings.IndexAny(s[1:], "\"\\"); i >= 0 && s[1+i] == '"' {
			return s[1 : 1+i], s[2+i:], true
		}
	}
	var b strings.Builder
	switch {
	case strings.HasPrefix(s, `"`):
		for i := 1; i < len(s); i++ {
			switch c := s[i]; {
			case c == '"':
				return b.String(), s[i+1:], true
			case c == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0:
				b.WriteByte(s[i+1])
				i++
			default:
				b.WriteByte(c)
			}
		}
	case strings.HasPrefix(s, "$'"):
		for i := 2; i < len(s); i++ {
			c := s[i]
			if c == '\'' {
				return b.String(), s[i+1:], true
			}
			if c != '\\' || i+1 == len(s) {
				b.WriteByte(c)
				continue
			}
			i++
			if j := strings.IndexByte(`abeEfnrtv\'"?`, s[i]); j >= 0 {
				b.WriteByte("\a\b\x1b\x1b\f\n\r\t\v\\'\"?"[j])
				continue
			}
			n := 0
			for n < 3 && i+n < len(s) && '0' <= s[i+n] && s[i+n] <= '7' {
				n++
			}
			if n == 0 {
				return "", "", false
			}
			v, _ := strconv.ParseUint(s[i:i+n], 8, 8)
			b.WriteByte(byte(v))
			i += n - 1
		}
	}
	return "", "", false
}
