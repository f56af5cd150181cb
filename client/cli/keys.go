package cli

import "unicode/utf8"

// key is one editing key decoded from terminal input.
type key int

const (
	keyIgnore      key = iota // an unknown sequence or control character
	keyRune                   // a printable rune to insert
	keyEnter                  // CR or LF (CR LF counts once)
	keyBackspace              // DEL or ^H
	keyDelete                 // the Delete key
	keyCtrlD                  // EOF on an empty line, else Delete
	keyLeft                   // ← or ^B
	keyRight                  // → or ^F
	keyHome                   // Home or ^A
	keyEnd                    // End or ^E
	keyUp                     // ↑ or ^P: older history
	keyDown                   // ↓ or ^N: newer history
	keyWordLeft               // Alt-← Ctrl-← or ESC b
	keyWordRight              // Alt-→ Ctrl-→ or ESC f
	keyKillEnd                // ^K
	keyKillStart              // ^U
	keyKillWord               // ^W
	keyClearScreen            // ^L
)

// controls maps the control characters the editor knows to their keys.
var controls = map[byte]key{
	1: keyHome, 2: keyLeft, 4: keyCtrlD, 5: keyEnd, 6: keyRight, 8: keyBackspace,
	10: keyEnter, 11: keyKillEnd, 12: keyClearScreen, 13: keyEnter, 14: keyDown,
	16: keyUp, 21: keyKillStart, 23: keyKillWord, 127: keyBackspace,
}

// csiKeys maps the final byte (with its parameters) of the CSI and SS3
// sequences the editor knows to their keys.
var csiKeys = map[string]key{
	"A": keyUp, "B": keyDown, "C": keyRight, "D": keyLeft, "H": keyHome, "F": keyEnd,
	"1~": keyHome, "7~": keyHome, "4~": keyEnd, "8~": keyEnd, "3~": keyDelete,
	"1;3C": keyWordRight, "1;3D": keyWordLeft, "1;5C": keyWordRight, "1;5D": keyWordLeft,
}

// nextKey decodes the first key of b and returns it, the rune for
// keyRune, and the rest of b. ok is false when b holds only the start of
// a key (an escape sequence or a rune cut by the read): read more.
func nextKey(b []byte) (k key, r rune, rest []byte, ok bool) {
	if len(b) == 0 {
		return keyIgnore, 0, b, false
	}
	if b[0] == 0x1b {
		return escapeKey(b)
	}
	if k, known := controls[b[0]]; known {
		if b[0] == '\r' && len(b) > 1 && b[1] == '\n' {
			return keyEnter, 0, b[2:], true
		}
		return k, 0, b[1:], true
	}
	if b[0] < 0x20 {
		return keyIgnore, 0, b[1:], true
	}
	if !utf8.FullRune(b) {
		return keyIgnore, 0, b, false
	}
	r, n := utf8.DecodeRune(b)
	return keyRune, r, b[n:], true
}

// escapeKey decodes a sequence starting with ESC: CSI (ESC [) and SS3
// (ESC O) sequences, ESC b and ESC f (word moves); other ESCs are dropped.
func escapeKey(b []byte) (key, rune, []byte, bool) {
	if len(b) < 2 {
		return keyIgnore, 0, b, false
	}
	switch b[1] {
	case 'b':
		return keyWordLeft, 0, b[2:], true
	case 'f':
		return keyWordRight, 0, b[2:], true
	case '[', 'O':
	default:
		return keyIgnore, 0, b[1:], true
	}
	// parameters and intermediates (0x20-0x3f), then one final byte
	for i := 2; i < len(b); i++ {
		if b[i] >= 0x20 && b[i] <= 0x3f {
			continue
		}
		return csiKeys[string(b[2:i+1])], 0, b[i+1:], true
	}
	return keyIgnore, 0, b, false
}
