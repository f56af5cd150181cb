package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// KeyPrefix starts every API key.
const KeyPrefix = "bwk_"

const (
	keyIDBytes     = 6  // 12 hex digits
	keySecretBytes = 32 // 64 hex digits
)

// ParseKey splits a key into its public id and its secret.
func ParseKey(key string) (id, secret string, err error) {
	rest, ok := strings.CutPrefix(key, KeyPrefix)
	id, secret, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || !isHex(id, 2*keyIDBytes) || !isHex(secret, 2*keySecretBytes) {
		return "", "", errors.New("not a boxwire key (bwk_<12 hex>_<64 hex>)")
	}
	return id, secret, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func hashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// AddUser creates a user; it fails with ErrExists when the name is taken.
func (a *Authenticator) AddUser(ctx context.Context, name string, admin bool, lim Limits) (User, error) {
	if a.cfg.Store == nil {
		return User{}, errors.New("no user store")
	}
	if !ValidName(name) || name == AdminUser {
		return User{}, fmt.Errorf("user name %q: want 1-64 letters, digits, '.', '_', '-' or '@', and not %q", name, AdminUser)
	}
	if _, err := a.cfg.Store.User(ctx, name); err == nil {
		return User{}, fmt.Errorf("user %q: %w", name, ErrExists)
	} else if !errors.Is(err, ErrNotFound) {
		return User{}, err
	}
	u := User{Name: name, Admin: admin, Created: a.cfg.Now().UTC(), Limits: lim}
	if err := a.cfg.Store.PutUser(ctx, u); err != nil {
		return User{}, fmt.Errorf("store user %q: %w", name, err)
	}
	return u, nil
}

// CreateKey issues a key for user: it returns the key (the only time its
// secret exists outside the caller) and what is stored. ttl 0 means no
// expiry.
func (a *Authenticator) CreateKey(ctx context.Context, user, name string, ttl time.Duration) (string, Key, error) {
	if a.cfg.Store == nil {
		return "", Key{}, errors.New("no user store")
	}
	if _, err := a.cfg.Store.User(ctx, user); err != nil {
		return "", Key{}, fmt.Errorf("user %q: %w", user, err)
	}
	id, err := randomHex(keyIDBytes)
	if err != nil {
		return "", Key{}, err
	}
	secret, err := randomHex(keySecretBytes)
	if err != nil {
		return "", Key{}, err
	}
	k := Key{ID: id, User: user, Name: name, Hash: hashSecret(secret), Created: a.cfg.Now().UTC()}
	if ttl > 0 {
		exp := k.Created.Add(ttl)
		k.Expires = &exp
	}
	if err := a.cfg.Store.PutKey(ctx, k); err != nil {
		return "", Key{}, fmt.Errorf("store key: %w", err)
	}
	return KeyPrefix + id + "_" + secret, k, nil
}

// RevokeKey revokes the key id: its next request is refused and its open
// connections are told at once (Watch). Revoking a revoked key is not an
// error.
func (a *Authenticator) RevokeKey(ctx context.Context, id string) (Key, error) {
	if a.cfg.Store == nil {
		return Key{}, errors.New("no user store")
	}
	k, err := a.cfg.Store.Key(ctx, id)
	if err != nil {
		return Key{}, fmt.Errorf("key %q: %w", id, err)
	}
	if k.Revoked == nil {
		now := a.cfg.Now().UTC()
		k.Revoked = &now
		if err := a.cfg.Store.PutKey(ctx, k); err != nil {
			return Key{}, fmt.Errorf("store key: %w", err)
		}
	}
	a.notify("key:" + id)
	return k, nil
}

// DeleteUser removes a user and their keys; their open connections are
// told at once.
func (a *Authenticator) DeleteUser(ctx context.Context, name string) error {
	if a.cfg.Store == nil {
		return errors.New("no user store")
	}
	if _, err := a.cfg.Store.User(ctx, name); err != nil {
		return fmt.Errorf("user %q: %w", name, err)
	}
	if err := a.cfg.Store.DeleteUser(ctx, name); err != nil {
		return fmt.Errorf("delete user %q: %w", name, err)
	}
	a.notify("user:" + name)
	return nil
}

// Users lists the users.
func (a *Authenticator) Users(ctx context.Context) ([]User, error) {
	if a.cfg.Store == nil {
		return nil, nil
	}
	return a.cfg.Store.Users(ctx)
}

// Keys lists the keys of user ("" for every user's).
func (a *Authenticator) Keys(ctx context.Context, user string) ([]Key, error) {
	if a.cfg.Store == nil {
		return nil, nil
	}
	return a.cfg.Store.Keys(ctx, user)
}

// User returns the stored user name; the admin token's user is built in.
func (a *Authenticator) User(ctx context.Context, name string) (User, error) {
	if name == AdminUser {
		return User{Name: AdminUser, Admin: true}, nil
	}
	if a.cfg.Store == nil {
		return User{}, ErrNotFound
	}
	return a.cfg.Store.User(ctx, name)
}
