package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// DecodeArgs unmarshals the model's arguments into v. Missing or null
// arguments decode as an empty object; unknown fields are ignored.
func DecodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("invalid arguments: %v", err)
	}
	return nil
}

// Missing is the result of a call that lacks the required argument field.
func Missing(field string) Result {
	return Result{Err: fmt.Sprintf("missing required argument %q", field)}
}

// Failed is the result of a call that failed, saying why (fmt.Sprintf of
// format and a).
func Failed(format string, a ...any) Result {
	return Result{Err: fmt.Sprintf(format, a...)}
}

// TrimPartialRune drops an incomplete UTF-8 character from the end of b,
// as left by cutting text at a byte count.
func TrimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}

// OneLine shows s on one line of at most n bytes: runs of white space
// become one space, and a longer s is cut and ends in "…".
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = string(TrimPartialRune([]byte(s[:n]))) + "…"
	}
	return s
}
