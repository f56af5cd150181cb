-- The bridge's store on PostgreSQL (bridge/store/pgstore): what the bbolt
-- file keeps, as tables. Records whose shape the Go types own (threads,
-- users, keys, cursors, requests in flight) are JSON beside the columns
-- queries need; json, not jsonb, so they read back byte for byte.

-- +goose Up
CREATE TABLE threads (
    id      text PRIMARY KEY,
    created timestamptz NOT NULL,
    owner   text NOT NULL DEFAULT '',
    record  json NOT NULL -- store.Thread
);
CREATE INDEX threads_created ON threads (created, id);

-- One row per thread that has (or had) a log, locked FOR UPDATE by every
-- transaction that appends to it: the seq of its newest event, when the
-- newest was written (retention by age), and when it was deleted (a
-- tombstone: later writes are dropped).
CREATE TABLE thread_logs (
    thread   text PRIMARY KEY,
    last_seq bigint NOT NULL DEFAULT 0,
    activity timestamptz,
    deleted  timestamptz
);
CREATE INDEX thread_logs_activity ON thread_logs (activity) WHERE deleted IS NULL;

CREATE TABLE events (
    thread   text NOT NULL,
    seq      bigint NOT NULL,
    size     integer NOT NULL, -- bytes of envelope, for retention by size
    envelope json NOT NULL,    -- wire.Envelope
    PRIMARY KEY (thread, seq)
);

CREATE TABLE agent_cursors (
    thread text PRIMARY KEY,
    cursor json NOT NULL -- store.Cursor
);

CREATE TABLE inflight (
    thread   text PRIMARY KEY,
    requests json NOT NULL -- []wire.Envelope, never empty
);

CREATE TABLE users (
    name   text PRIMARY KEY,
    record json NOT NULL -- auth.User
);

CREATE TABLE keys (
    id      text PRIMARY KEY,
    "user"  text NOT NULL,
    record  json NOT NULL -- auth.Key
);
CREATE INDEX keys_user ON keys ("user");

CREATE TABLE audit (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    time   timestamptz NOT NULL,
    "user" text NOT NULL,
    action text NOT NULL,
    thread text NOT NULL,
    entry  json NOT NULL -- auth.AuditEntry
);

-- +goose Down
DROP TABLE audit, keys, users, inflight, agent_cursors, events, thread_logs, threads;
