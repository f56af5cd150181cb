// Package preview serves what listens inside a thread's sandbox over the
// bridge's own HTTP listener (docs/preview.md): preview URLs, public
// links, and a WebSocket per forwarded TCP connection for `client
// forward`. The sandbox has no network; every byte travels as a port
// stream on the thread's agent connection (bridge/agentlink, [Backend]),
// and the only thing ever dialled is a port on the sandbox's own loopback.
//
// Forms of a preview URL:
//
//   - path form, /v1/threads/{id}/ports/{port}/…, on the bridge's host:
//     the owner's bearer key or web session. Its responses carry
//     "Content-Security-Policy: sandbox …": the app's pages run in an
//     opaque origin, so their scripts cannot use the bridge's session.
//   - host form, {port}-{thread}.{domain}/… (Config.Domain): a host of its
//     own, so apps that assume they live at / work; the owner's bearer key,
//     or a preview cookie a browser logged in to the bridge gets through a
//     one-time ticket (GET /v1/threads/{id}/open/{port}, session.go).
//   - public links, /v1/public/{token}/… and pub-{token}.{domain}/…: no
//     credentials, an unguessable token per thread and port, revoked at
//     once by DELETE (and by a bridge restart: links live in memory).
//
// HTTP/1.1 keep-alive, streamed responses, server-sent events and
// WebSocket upgrades pass through ([net/http/httputil.ReverseProxy] over
// one [http.Transport] whose only dialer is [Backend.DialPort]: no proxy
// from the environment, no DNS, no host network). The bearer key and the
// bridge's cookies never reach the app. A port nothing listens on is
// answered 502 with a body that says so.
//
// [Preview.Routes] mounts the routes behind the server's own guard
// (authentication and thread ownership); [Preview.Hosts] answers the
// preview host names before the bridge's Host check. A Preview holds its
// public links and a Transport's idle connections; [Preview.Close] drops
// them.
package preview
