-- Write-ahead audit of workspace file writes and the tamper-evident audit chain (PostgreSQL).
-- Keep in step with ../sqlite/00004_audit_chain.sql.
--
-- audit_events gains:
--   - outcome 'attempted': the write-ahead record committed before a workspace file write is
--     sent to the gateway; the outcome record names it in attempt_id.
--   - chain_seq, prev_hash, hash: the event's place in the installation's hash chain (commit
--     order), NULL on events written before this migration (they precede the chain).
-- ADD COLUMN rewrites no row and fires no UPDATE trigger, so the append-only triggers stay.
-- audit_chain is the chain's head: one row that every append locks (SELECT ... FOR UPDATE) and
-- updates in its own transaction, so appends from several API replicas are serialized and the
-- chain order is the commit order.

-- +goose Up
ALTER TABLE audit_events
    ADD COLUMN attempt_id text COLLATE "C",
    ADD COLUMN chain_seq  bigint UNIQUE CHECK (chain_seq >= 1),
    ADD COLUMN prev_hash  text CHECK (length(prev_hash) = 64),
    ADD COLUMN hash       text CHECK (length(hash) = 64),
    DROP CONSTRAINT audit_events_outcome_check,
    ADD CONSTRAINT audit_events_outcome_check CHECK (outcome IN ('success', 'denied', 'failure', 'attempted')),
    ADD CONSTRAINT audit_events_attempt_check CHECK (attempt_id IS NULL OR outcome IN ('success', 'failure')),
    ADD CONSTRAINT audit_events_chain_check CHECK ((chain_seq IS NULL) = (hash IS NULL) AND (chain_seq IS NULL) = (prev_hash IS NULL));
CREATE INDEX audit_events_attempt_idx ON audit_events (attempt_id) WHERE attempt_id IS NOT NULL;

CREATE TABLE audit_chain (
    id   integer PRIMARY KEY CHECK (id = 1),
    seq  bigint NOT NULL CHECK (seq >= 0),
    hash text NOT NULL CHECK (length(hash) = 64)
);
INSERT INTO audit_chain (id, seq, hash) VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

CREATE TRIGGER audit_chain_no_delete BEFORE DELETE ON audit_chain
    FOR EACH ROW EXECUTE FUNCTION occ_refuse_change();
CREATE TRIGGER audit_chain_no_truncate BEFORE TRUNCATE ON audit_chain
    FOR EACH STATEMENT EXECUTE FUNCTION occ_refuse_change();

-- +goose Down
DROP TABLE audit_chain;
DROP INDEX audit_events_attempt_idx;
-- Attempted records have no place in the old schema: the check is restored NOT VALID so that
-- existing ones (which the append-only trigger keeps) do not block the rollback.
ALTER TABLE audit_events
    DROP CONSTRAINT audit_events_chain_check,
    DROP CONSTRAINT audit_events_attempt_check,
    DROP CONSTRAINT audit_events_outcome_check,
    DROP COLUMN hash,
    DROP COLUMN prev_hash,
    DROP COLUMN chain_seq,
    DROP COLUMN attempt_id;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_outcome_check
    CHECK (outcome IN ('success', 'denied', 'failure')) NOT VALID;
