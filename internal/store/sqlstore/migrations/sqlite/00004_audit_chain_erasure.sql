-- Write-ahead audit of workspace file writes and the tamper-evident audit chain (SQLite).
-- Keep in step with ../postgres/00004_audit_chain_erasure.sql (whose workspace_setups_guard
-- change has no SQLite counterpart: SQLite writes no server log that could echo a failing row).
--
-- audit_events gains:
--   - outcome 'attempted': the write-ahead record committed before a workspace file write is
--     sent to the gateway; the outcome record names it in attempt_id.
--   - chain_seq, prev_hash, hash: the event's place in the installation's hash chain (commit
--     order), NULL on events written before this migration (they precede the chain).
-- SQLite cannot change a CHECK constraint in place, so the table is rebuilt; its rows are copied
-- unchanged. DROP TABLE fires no DELETE trigger, and no foreign key refers to audit_events.
-- audit_chain is the chain's head: one row, updated in the same transaction as every append,
-- so appends are serialized (SQLite has one writer anyway).

-- +goose Up
CREATE TABLE audit_events_v4 (
    id            TEXT NOT NULL PRIMARY KEY,
    occurred_at   TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('bootstrap', 'mutation', 'access', 'authorization_denial')),
    actor_id      TEXT NOT NULL,
    credential    TEXT,
    request_id    TEXT,
    action        TEXT NOT NULL,
    namespace_id  TEXT,
    resource_kind TEXT,
    resource_id   TEXT,
    outcome       TEXT NOT NULL CHECK (outcome IN ('success', 'denied', 'failure', 'attempted')),
    reason_code   TEXT,
    details       TEXT CHECK (details IS NULL OR (json_valid(details) AND json_type(details) = 'object')),
    attempt_id    TEXT CHECK (attempt_id IS NULL OR outcome IN ('success', 'failure')),
    chain_seq     INTEGER UNIQUE CHECK (chain_seq >= 1),
    prev_hash     TEXT CHECK (length(prev_hash) = 64),
    hash          TEXT CHECK (length(hash) = 64),
    CHECK ((chain_seq IS NULL) = (hash IS NULL) AND (chain_seq IS NULL) = (prev_hash IS NULL))
) STRICT;
INSERT INTO audit_events_v4 (id, occurred_at, kind, actor_id, credential, request_id, action,
        namespace_id, resource_kind, resource_id, outcome, reason_code, details)
    SELECT id, occurred_at, kind, actor_id, credential, request_id, action,
        namespace_id, resource_kind, resource_id, outcome, reason_code, details FROM audit_events;
DROP TABLE audit_events;
ALTER TABLE audit_events_v4 RENAME TO audit_events;
CREATE INDEX audit_events_order_idx ON audit_events (occurred_at DESC, id DESC);
CREATE INDEX audit_events_namespace_idx ON audit_events (namespace_id, occurred_at DESC, id DESC);
CREATE INDEX audit_events_resource_idx ON audit_events (resource_kind, resource_id, occurred_at DESC, id DESC);
CREATE INDEX audit_events_actor_idx ON audit_events (actor_id, occurred_at DESC, id DESC);
CREATE INDEX audit_events_attempt_idx ON audit_events (attempt_id) WHERE attempt_id IS NOT NULL;

-- +goose StatementBegin
CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'audit_events is append-only (UPDATE refused)');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'audit_events is append-only (DELETE refused)');
END;
-- +goose StatementEnd

CREATE TABLE audit_chain (
    id   INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL CHECK (seq >= 0),
    hash TEXT NOT NULL CHECK (length(hash) = 64)
) STRICT;
INSERT INTO audit_chain (id, seq, hash) VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

-- +goose StatementBegin
CREATE TRIGGER audit_chain_no_delete BEFORE DELETE ON audit_chain
BEGIN
    SELECT RAISE(ABORT, 'audit_chain cannot be deleted');
END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE audit_chain;
CREATE TABLE audit_events_v1 (
    id            TEXT NOT NULL PRIMARY KEY,
    occurred_at   TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('bootstrap', 'mutation', 'access', 'authorization_denial')),
    actor_id      TEXT NOT NULL,
    credential    TEXT,
    request_id    TEXT,
    action        TEXT NOT NULL,
    namespace_id  TEXT,
    resource_kind TEXT,
    resource_id   TEXT,
    outcome       TEXT NOT NULL CHECK (outcome IN ('success', 'denied', 'failure')),
    reason_code   TEXT,
    details       TEXT CHECK (details IS NULL OR (json_valid(details) AND json_type(details) = 'object'))
) STRICT;
-- Attempted records have no place in the old schema; they are dropped with the chain.
INSERT INTO audit_events_v1 SELECT id, occurred_at, kind, actor_id, credential, request_id, action,
        namespace_id, resource_kind, resource_id, outcome, reason_code, details
    FROM audit_events WHERE outcome <> 'attempted';
DROP TABLE audit_events;
ALTER TABLE audit_events_v1 RENAME TO audit_events;
CREATE INDEX audit_events_order_idx ON audit_events (occurred_at DESC, id DESC);
CREATE INDEX audit_events_namespace_idx ON audit_events (namespace_id, occurred_at DESC, id DESC);
CREATE INDEX audit_events_resource_idx ON audit_events (resource_kind, resource_id, occurred_at DESC, id DESC);
CREATE INDEX audit_events_actor_idx ON audit_events (actor_id, occurred_at DESC, id DESC);

-- +goose StatementBegin
CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'audit_events is append-only (UPDATE refused)');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'audit_events is append-only (DELETE refused)');
END;
-- +goose StatementEnd
