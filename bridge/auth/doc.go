// Package auth says who a request comes from: the bridge's own admin
// token, an API key of a user in the store, or (optionally) a JWT from an
// OpenID Connect issuer. It keeps users and keys, issues keys (shown once,
// stored only as a hash), revokes them with immediate effect for live
// connections ([Authenticator.Watch]), slows brute force per client
// address without slowing anyone else, and writes the audit log.
//
// Keys look like bwk_<id>_<secret>: the id (12 hex digits) is public — it
// is what `bridge keys list` shows and `bridge keys revoke` takes — and the
// secret (64 hex digits, 256 random bits) is never stored: the store keeps
// its SHA-256, which is enough for a secret of that strength (no password
// hashing is needed). The bwk_ prefix lets secret scanners find leaked keys.
//
// Storage is an interface ([Store]); bridge/store implements it in the
// bridge's bbolt file, bridge/store/pgstore in PostgreSQL. An
// [Authenticator] is safe for concurrent use.
package auth
