// Package users is who may do what on the bridge (docs/users.md):
// identity on every request, ownership of threads, per-user quotas, the
// audit record of what each user does, and GET /v1/users/me beside the
// admin API of bridge/auth.
//
// Every request is authenticated (the bridge's own token as the admin, a
// user's API key, an OIDC JWT, or a browser session) and carries its
// auth.Principal in its context ([WithPrincipal], [PrincipalOf]). Every
// thread has an owner (its record's Owner; threads from before users
// existed belong to auth.AdminUser, [OwnerName]). A thread is visible to
// its owner and to admins only; to anyone else it does not exist: the same
// 404 not_found, body and all, as a thread that was never made.
//
// The server makes one [Users] with [New], over the [Threads] it keeps
// (who owns a thread, which threads have a sandbox), and uses it as:
//
//   - HTTP guards: [Users.Auth] (every route), [Users.Admin],
//     [Users.Owned] (routes naming a thread), [Users.Audited];
//   - checks: [Users.Hidden] (a hello naming another user's thread),
//     [Users.CheckSandboxQuota] (a new thread), [Users.Visible] (a list
//     of threads);
//   - the fleet's LLM hooks: [Users.AdmitModelCall], [Users.CountTokens]
//     (tokens per day);
//   - [Users.Record] for the audit log and [Users.Watch] to end a
//     connection whose credentials are revoked;
//   - [Users.Routes] to mount /v1/users/me and the admin API.
//
// It imports auth, the bridge's HTTP answers and wire; never the server.
// A Users is safe for concurrent use.
package users
