package auth

import (
	"context"
	"time"
)

// AuditEntry is one line of the audit log: who did what to which thread.
type AuditEntry struct {
	Time   time.Time `json:"time"`
	User   string    `json:"user"`
	KeyID  string    `json:"key_id,omitempty"`
	Action string    `json:"action"` // e.g. thread.create, thread.attach, files.download, approval.approve
	Thread string    `json:"thread,omitempty"`
	Detail string    `json:"detail,omitempty"`
	Remote string    `json:"remote,omitempty"`
}

// AuditFilter selects audit entries; zero fields match all.
type AuditFilter struct {
	User   string
	Action string
	Thread string
	Since  time.Time
	// Limit keeps the newest Limit entries (0: all).
	Limit int
}

// Match reports whether e passes f.
func (f AuditFilter) Match(e AuditEntry) bool {
	return (f.User == "" || e.User == f.User) && (f.Action == "" || e.Action == f.Action) &&
		(f.Thread == "" || e.Thread == f.Thread) && !e.Time.Before(f.Since)
}

// Record appends an entry for p's action to the audit log. A failure is
// logged, not returned: the action itself has happened.
func (a *Authenticator) Record(ctx context.Context, p Principal, action, thread, detail, remote string) {
	if a.cfg.Store == nil {
		return
	}
	e := AuditEntry{Time: a.cfg.Now().UTC(), User: p.User, KeyID: p.KeyID, Action: action, Thread: thread,
		Detail: detail, Remote: clientAddr(remote)}
	if err := a.cfg.Store.AppendAudit(ctx, e); err != nil {
		a.log.Error("audit log", "entry", e, "err", err)
	}
}

// Audit returns the audit entries that match f.
func (a *Authenticator) Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	if a.cfg.Store == nil {
		return nil, nil
	}
	return a.cfg.Store.Audit(ctx, f)
}
