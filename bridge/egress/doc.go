// Package egress is the bridge's allowlisting HTTP proxy: the only way out
// of a sandbox that runs with --network none, when a thread is given one.
//
// The bridge serves a [Proxy] on a unix socket in the sandbox's own socket
// folder; the agent exposes that socket on the sandbox's loopback
// (127.0.0.1:3128) and points HTTP_PROXY and HTTPS_PROXY at it. The proxy
// speaks CONNECT (for TLS and anything else tunnelled) and plain
// absolute-URI HTTP. Each request's target is normalized strictly (see
// [Normalize]) and matched against [Rules]: exact hosts and domain
// suffixes, with ports. Everything else is refused with 403 and a plain
// text body saying why. Every decision is logged and reported through
// Config.OnDecision.
//
// The name the proxy matches is the name it dials: nothing the sandbox
// sends is resolved or interpreted twice. Names that resolve to loopback,
// private, link-local or unspecified addresses are refused unless the rule
// that allowed them is an IP literal (or AllowPrivate is set), so an
// allowed name cannot be pointed at the host's own services.
package egress
