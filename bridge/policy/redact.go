package policy

import (
	"regexp"
	"slices"
	"strings"
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
	secrets []string // longest first
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

// Redact returns s with every secret and key pattern replaced by Mask.
func (r *Redactor) Redact(s string) string {
	if r == nil || s == "" {
		return s
	}
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, Mask)
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
