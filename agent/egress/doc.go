// Package egress exposes the bridge's egress proxy, a unix socket in the
// sandbox's socket folder, on the sandbox's own loopback (127.0.0.1:3128),
// where commands reach it through HTTP_PROXY and HTTPS_PROXY ([Env]).
// It forwards bytes only: the bridge decides what is allowed.
package egress
