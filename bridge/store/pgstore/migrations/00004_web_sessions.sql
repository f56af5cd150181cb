-- Browser sessions, shared by the bridges on the database: a login
-- through one bridge is a session on every one of them, and a logout
-- through any ends it everywhere (bridge/web, bridge/store/pgstore/websessions.go).
-- A row is keyed by the SHA-256 of the cookie's value, never the value.

-- +goose Up
CREATE TABLE web_sessions (
    key     text PRIMARY KEY,
    data    bytea NOT NULL,
    expires timestamptz NOT NULL
);
CREATE INDEX web_sessions_expires ON web_sessions (expires);

-- +goose Down
DROP TABLE web_sessions;
