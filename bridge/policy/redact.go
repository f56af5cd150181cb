package policy

import (
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Mask replaces a redacted secret.
const Mask = "[REDACTED]"

// minSecretLen is the shortest configured secret that is masked: shorter
// values would mask ordinary words.
const minSecretLen = 6

// keyPatterns are common credential shapes: OpenAI-style sk- keys, GitHub
// tokens, AWS access key ids, bearer and basic tokens in headers, and
// private key blocks.
var keyPatterns = regexp.MustCompile(strings.Join([]string{
	`\bsk-[A-Za-z0-9_-]{16,}`,
	`\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}`,
	`\bgithub_pat_[A-Za-z0-9_]{20,}`,
	`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`,
	`\bxox[abprs]-[A-Za-z0-9-]{10,}`,
	`(?i)\b(?:bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{12,}`,
	`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`,
}, "|"))

// Redactor masks configured secret values and common key patterns. It is
// immutable and safe for concurrent use.
type Redactor struct {
	secrets  []string // longest first
	patterns []*regexp.Regexp
}

// NewRedactor returns a redactor for secrets (values shorter than six
// characters are ignored).
func NewRedactor(secrets []string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		if len(s) >= minSecretLen && !slices.Contains(r.secrets, s) {
			r.secrets = append(r.secrets, s)
		}
	}
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
	return r
}

// With returns a redactor that masks r's secrets and patterns, secrets
// and patterns. r may be nil.
func (r *Redactor) With(secrets []string, patterns []*regexp.Regexp) *Redactor {
	var all []string
	var pats []*regexp.Regexp
	if r != nil {
		all, pats = slices.Clone(r.secrets), slices.Clone(r.patterns)
	}
	out := NewRedactor(append(all, secrets...))
	out.patterns = append(pats, patterns...)
	return out
}

// RedactCount is Redact, also saying how many masks it put in.
func (r *Redactor) RedactCount(s string) (string, int) {
	out := r.Redact(s)
	if out == s {
		return out, 0
	}
	return out, max(0, strings.Count(out, Mask)-strings.Count(s, Mask))
}

// Redact returns s with every secret and key pattern replaced by Mask.
func (r *Redactor) Redact(s string) string {
	if r == nil || s == "" {
		return s
	}
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, Mask)
	}
	for _, p := range r.patterns {
		s = p.ReplaceAllLiteralString(s, Mask)
	}
	return keyPatterns.ReplaceAllStringFunc(s, func(m string) string {
		lower := strings.ToLower(m)
		for _, p := range []string{"bearer", "basic", "token"} {
			if strings.HasPrefix(lower, p) {
				return m[:len(p)] + " " + Mask
			}
		}
		return Mask
	})
}

// MaxHold is the most bytes of a stream's tail HoldFrom keeps back.
const MaxHold = 256

// pendingTail matches the end of a chunk that may be the start of a key
// continuing in the next chunk: a run of token characters, with a
// bearer/basic/token keyword in front of it.
var pendingTail = regexp.MustCompile(`(?i)(?:\b(?:bearer|basic|token)[ \t]+)?[A-Za-z0-9._~+/=-]*$`)

// HoldFrom is for streams masked chunk by chunk: it returns the index in
// s from which s's tail could be the start of a secret or key that goes
// on in the next chunk (a prefix of a configured secret, or a token cut
// at the end). Send Redact(s[:i]) now and put s[i:] in front of the next
// chunk; at the end of the stream send Redact of what is left. At most
// MaxHold bytes are held. PEM blocks are longer and are not held.
func (r *Redactor) HoldFrom(s string) int {
	if r == nil || s == "" {
		return len(s)
	}
	i := len(s)
	if loc := pendingTail.FindStringIndex(s); loc != nil {
		i = loc[0]
	}
	for _, sec := range r.secrets {
		for k := min(len(sec)-1, len(s)); k > 0; k-- {
			if strings.HasSuffix(s, sec[:k]) {
				i = min(i, len(s)-k)
				break
			}
		}
	}
	if len(s)-i > MaxHold {
		i = len(s) - MaxHold
	}
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}
