-- Leases (which bridge relays a thread) and approvals waiting for an
-- answer (issue 22 item 2; bridge/store/pgstore/lease.go, approval.go).

-- +goose Up
-- One row per thread ever leased; an expired or released lease keeps its
-- row so that the next holder's epoch is one more.
CREATE TABLE leases (
    thread  text PRIMARY KEY,
    holder  text NOT NULL,
    epoch   bigint NOT NULL,
    expires timestamptz NOT NULL
);

CREATE TABLE approvals (
    id      text PRIMARY KEY,
    threads text[] NOT NULL,
    created timestamptz NOT NULL,
    decided boolean NOT NULL,
    record  json NOT NULL -- store.Approval
);
CREATE INDEX approvals_threads ON approvals USING gin (threads);

-- +goose Down
DROP TABLE approvals, leases;
