-- Where the bridges on the database reach each other (issue 22 item 2:
-- a client of one bridge is forwarded to the bridge that relays its
-- thread; bridge/store/pgstore/lease.go).

-- +goose Up
CREATE TABLE bridges (
    id      text PRIMARY KEY,
    address text NOT NULL,
    updated timestamptz NOT NULL
);

-- +goose Down
DROP TABLE bridges;
