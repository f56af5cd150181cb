package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/coreos/go-oidc/v3/oidc"
)

// OIDCConfig says which identity provider's tokens to accept.
type OIDCConfig struct {
	// Issuer is the issuer URL; its /.well-known/openid-configuration
	// names the JWKS. Required.
	Issuer string
	// Audience is the required "aud"; required.
	Audience string
	// Claim names the user; default "sub" (e.g. "email",
	// "preferred_username").
	Claim string
	// CreateUsers creates a user on first use of a valid token naming an
	// unknown one; otherwise such a token is refused.
	CreateUsers bool
	// HTTPClient fetches discovery and keys; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// OIDCVerifier verifies JWTs of one issuer. Signing keys come from the
// issuer's JWKS, fetched on first use, cached, and fetched again when a
// token names a key id the cache lacks (key rotation); only the
// asymmetric algorithms the issuer announces are accepted ("none" and
// HMAC never are). It is go-oidc's verifier: no hand-written checks.
type OIDCVerifier struct {
	cfg      OIDCConfig
	verifier *oidc.IDTokenVerifier
}

// NewOIDCVerifier fetches the issuer's discovery document (bounded by
// ctx) and returns a verifier for its tokens.
func NewOIDCVerifier(ctx context.Context, cfg OIDCConfig) (*OIDCVerifier, error) {
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("oidc: issuer and audience are required")
	}
	if cfg.Claim == "" {
		cfg.Claim = "sub"
	}
	if cfg.HTTPClient != nil {
		ctx = oidc.ClientContext(ctx, cfg.HTTPClient)
	}
	provider, err := oidc.NewProvider(ctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc: discover %s: %w", cfg.Issuer, err)
	}
	v := provider.Verifier(&oidc.Config{ClientID: cfg.Audience})
	return &OIDCVerifier{cfg: cfg, verifier: v}, nil
}

// user verifies raw and returns the user name its claim carries.
func (o *OIDCVerifier) user(ctx context.Context, raw string) (string, error) {
	if o.cfg.HTTPClient != nil {
		ctx = oidc.ClientContext(ctx, o.cfg.HTTPClient)
	}
	tok, err := o.verifier.Verify(ctx, raw)
	if err != nil {
		return "", err
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return "", err
	}
	name, _ := claims[o.cfg.Claim].(string)
	if !ValidName(name) {
		return "", fmt.Errorf("claim %q is not a user name: %q", o.cfg.Claim, name)
	}
	return name, nil
}

// checkJWT accepts a token of the configured issuer, creating its user
// when allowed.
func (a *Authenticator) checkJWT(ctx context.Context, raw string) (Principal, error) {
	name, err := a.cfg.OIDC.user(ctx, raw)
	if err != nil {
		a.log.Debug("oidc token refused", "err", err)
		return Principal{}, fmt.Errorf("%w: %v", ErrUnauthorized, err)
	}
	if a.cfg.Store == nil || name == AdminUser {
		return Principal{}, ErrUnauthorized
	}
	u, err := a.cfg.Store.User(ctx, name)
	switch {
	case errors.Is(err, ErrNotFound) && a.cfg.OIDC.cfg.CreateUsers:
		if u, err = a.AddUser(ctx, name, false, Limits{}); err != nil && !errors.Is(err, ErrExists) {
			return Principal{}, err
		}
		if errors.Is(err, ErrExists) { // created meanwhile by another request
			if u, err = a.cfg.Store.User(ctx, name); err != nil {
				return Principal{}, ErrUnauthorized
			}
		}
		a.log.Info("user created on first use", "user", name, "issuer", a.cfg.OIDC.cfg.Issuer)
	case err != nil:
		return Principal{}, ErrUnauthorized
	}
	return Principal{User: u.Name, Admin: u.Admin, Via: "oidc"}, nil
}
