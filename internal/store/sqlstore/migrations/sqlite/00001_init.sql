-- OCC schema, SQLite flavour. Keep in step with ../postgres/00001_init.sql: the two files
-- create the same tables, columns, keys and rules; only types and trigger syntax differ.
--
-- Conventions: tables are STRICT; times are TEXT in the fixed-width UTC format
-- 2006-01-02T15:04:05.000000Z, so text order is time order; booleans are INTEGER 0/1; JSON is
-- TEXT checked with json_valid. Optional strings are NULL, never ''.
-- CHECK constraints cannot hold subqueries in SQLite, so rules that need another row live in
-- triggers, which refuse with RAISE(ABORT, ...) (SQLITE_CONSTRAINT_TRIGGER).

-- +goose Up

-- installation is a singleton: the key column can only ever be 1.
CREATE TABLE installation (
    id         TEXT NOT NULL PRIMARY KEY,
    singleton  INTEGER NOT NULL DEFAULT 1 UNIQUE CHECK (singleton = 1),
    name       TEXT NOT NULL,
    created_at TEXT NOT NULL
) STRICT;

CREATE TABLE namespaces (
    id         TEXT NOT NULL PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    status     TEXT NOT NULL CHECK (status IN ('provisioning', 'ready', 'failed', 'deleting')),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
) STRICT;

CREATE TABLE configurations (
    id           TEXT NOT NULL PRIMARY KEY,
    namespace_id TEXT NOT NULL REFERENCES namespaces (id) ON DELETE RESTRICT,
    name         TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind = 'agent'),
    document     TEXT NOT NULL CHECK (json_valid(document) AND json_type(document) = 'object'),
    generation   INTEGER NOT NULL CHECK (generation >= 1),
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    UNIQUE (namespace_id, name),
    -- Target of agents' composite foreign key: an Agent can only use a Configuration of its
    -- own Namespace.
    UNIQUE (namespace_id, id)
) STRICT;

-- active_revision_id has no foreign key: revisions reference agents (see the PostgreSQL file).
CREATE TABLE agents (
    id                    TEXT NOT NULL PRIMARY KEY,
    namespace_id          TEXT NOT NULL REFERENCES namespaces (id) ON DELETE RESTRICT,
    name                  TEXT NOT NULL,
    configuration_id      TEXT NOT NULL,
    status                TEXT NOT NULL CHECK (status IN ('active', 'deleting')),
    desired_runtime_state TEXT NOT NULL CHECK (desired_runtime_state IN ('running', 'stopped')),
    active_revision_id    TEXT,
    deletion_requested_by TEXT,
    created_at            TEXT NOT NULL,
    updated_at            TEXT NOT NULL,
    UNIQUE (namespace_id, name),
    -- Target of the composite foreign keys of agent_revisions and workspace_setups.
    UNIQUE (namespace_id, id),
    FOREIGN KEY (namespace_id, configuration_id)
        REFERENCES configurations (namespace_id, id) ON UPDATE RESTRICT ON DELETE RESTRICT
) STRICT;
CREATE INDEX agents_configuration_idx ON agents (namespace_id, configuration_id);

CREATE TABLE agent_revisions (
    id                       TEXT NOT NULL PRIMARY KEY,
    namespace_id             TEXT NOT NULL,
    agent_id                 TEXT NOT NULL,
    revision_number          INTEGER NOT NULL CHECK (revision_number >= 1),
    configuration_id         TEXT NOT NULL,
    configuration_kind       TEXT NOT NULL,
    configuration_generation INTEGER NOT NULL CHECK (configuration_generation >= 1),
    configuration            TEXT NOT NULL CHECK (json_valid(configuration)),
    compute_driver_id        TEXT NOT NULL,
    created_by               TEXT NOT NULL,
    created_at               TEXT NOT NULL,
    UNIQUE (namespace_id, agent_id, revision_number),
    FOREIGN KEY (namespace_id, agent_id)
        REFERENCES agents (namespace_id, id) ON UPDATE RESTRICT ON DELETE CASCADE
) STRICT;

-- +goose StatementBegin
CREATE TRIGGER agent_revisions_immutable BEFORE UPDATE ON agent_revisions
BEGIN
    SELECT RAISE(ABORT, 'agent_revisions rows are immutable');
END;
-- +goose StatementEnd

-- controller_work: see the PostgreSQL file for why the ids carry no foreign keys.
CREATE TABLE controller_work (
    id               TEXT NOT NULL PRIMARY KEY,
    work_kind        TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL UNIQUE,
    namespace_id     TEXT,
    agent_id         TEXT,
    revision_id      TEXT,
    actor_id         TEXT,
    state            TEXT NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'succeeded', 'failed_permanent', 'cancelled')),
    available_at     TEXT NOT NULL,
    attempt_count    INTEGER NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
    claim_token      TEXT,
    lease_expires_at TEXT,
    completed_at     TEXT,
    reason_code      TEXT,
    last_error       TEXT,
    progress         TEXT CHECK (progress IS NULL OR json_valid(progress)),
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
) STRICT;
CREATE INDEX controller_work_claim_idx ON controller_work (state, available_at);
CREATE INDEX controller_work_agent_idx ON controller_work (namespace_id, agent_id);

-- workspace_setups: the private staging record of an Agent's initial workspace files.
-- files_valid without subqueries: a JSON object that is not {}; removing the four allowed keys
-- leaves {} (so no other key exists); each allowed key is absent or a string ('text') of at
-- most 16384 UTF-8 bytes (length of the value cast to BLOB counts bytes). The CASE keeps the
-- JSON functions away from text that is not valid JSON.
CREATE TABLE workspace_setups (
    id           TEXT NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
    namespace_id TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    defaults_id  TEXT CHECK (length(defaults_id) = 64 AND defaults_id NOT GLOB '*[^0-9a-f]*'),
    files        TEXT,
    completed    INTEGER NOT NULL DEFAULT 0 CHECK (completed IN (0, 1)),
    UNIQUE (namespace_id, agent_id),
    FOREIGN KEY (namespace_id, agent_id)
        REFERENCES agents (namespace_id, id) ON UPDATE RESTRICT ON DELETE CASCADE,
    CONSTRAINT workspace_setups_files_check CHECK (
        (completed = 1 AND files IS NULL)
        OR (completed = 0 AND files IS NOT NULL AND CASE
            WHEN NOT json_valid(files) THEN 0
            WHEN json_type(files) <> 'object' THEN 0
            WHEN json(files) = '{}' THEN 0
            WHEN json_remove(files, '$."AGENTS.md"', '$."SOUL.md"', '$."IDENTITY.md"', '$."USER.md"') <> '{}' THEN 0
            WHEN coalesce(json_type(files, '$."AGENTS.md"'), 'text') <> 'text' THEN 0
            WHEN coalesce(json_type(files, '$."SOUL.md"'), 'text') <> 'text' THEN 0
            WHEN coalesce(json_type(files, '$."IDENTITY.md"'), 'text') <> 'text' THEN 0
            WHEN coalesce(json_type(files, '$."USER.md"'), 'text') <> 'text' THEN 0
            WHEN length(CAST(coalesce(json_extract(files, '$."AGENTS.md"'), '') AS BLOB)) > 16384 THEN 0
            WHEN length(CAST(coalesce(json_extract(files, '$."SOUL.md"'), '') AS BLOB)) > 16384 THEN 0
            WHEN length(CAST(coalesce(json_extract(files, '$."IDENTITY.md"'), '') AS BLOB)) > 16384 THEN 0
            WHEN length(CAST(coalesce(json_extract(files, '$."USER.md"'), '') AS BLOB)) > 16384 THEN 0
            ELSE 1
        END = 1))
) STRICT;

-- The lifecycle rules the CHECK cannot express (they compare OLD with NEW or read agents).
-- SQLite has one writer at a time, so the agent status read here cannot change before commit.
-- +goose StatementBegin
CREATE TRIGGER workspace_setups_insert_guard BEFORE INSERT ON workspace_setups
BEGIN
    SELECT RAISE(ABORT, 'workspace setup must be created pending')
    WHERE NEW.completed IS NOT 0;
    SELECT RAISE(ABORT, 'workspace setup requires an active agent')
    WHERE NOT EXISTS (
        SELECT 1 FROM agents
        WHERE namespace_id = NEW.namespace_id AND id = NEW.agent_id AND status = 'active');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER workspace_setups_update_guard BEFORE UPDATE ON workspace_setups
BEGIN
    SELECT RAISE(ABORT, 'workspace setup identity is immutable')
    WHERE NEW.id IS NOT OLD.id
       OR NEW.namespace_id IS NOT OLD.namespace_id
       OR NEW.agent_id IS NOT OLD.agent_id
       OR NEW.defaults_id IS NOT OLD.defaults_id;
    SELECT RAISE(ABORT, 'completed workspace setup is immutable')
    WHERE OLD.completed IS NOT 0;
    SELECT RAISE(ABORT, 'pending workspace setup files cannot change')
    WHERE NEW.completed IS 0 AND NEW.files IS NOT OLD.files;
    SELECT RAISE(ABORT, 'completing a workspace setup must clear its files')
    WHERE NEW.completed IS NOT 0 AND NEW.files IS NOT NULL;
END;
-- +goose StatementEnd

-- audit_events is append-only: triggers refuse UPDATE and DELETE (SQLite has no TRUNCATE;
-- the trigger also disables its truncate optimisation for DELETE without WHERE).
CREATE TABLE audit_events (
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

-- email_key is the application-computed lower-case email (see the PostgreSQL file).
CREATE TABLE users (
    id            TEXT NOT NULL PRIMARY KEY,
    email         TEXT NOT NULL,
    email_key     TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    created_at    TEXT NOT NULL
) STRICT;

CREATE TABLE sessions (
    token_hash BLOB NOT NULL PRIMARY KEY CHECK (length(token_hash) = 32),
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at TEXT NOT NULL,
    created_at TEXT NOT NULL
) STRICT;
CREATE INDEX sessions_user_idx ON sessions (user_id);
CREATE INDEX sessions_expires_idx ON sessions (expires_at);

CREATE TABLE service_principals (
    id           TEXT NOT NULL PRIMARY KEY,
    name         TEXT NOT NULL,
    namespace_id TEXT,
    agent_id     TEXT,
    created_at   TEXT NOT NULL
) STRICT;

CREATE TABLE api_keys (
    id                   TEXT NOT NULL PRIMARY KEY,
    service_principal_id TEXT NOT NULL REFERENCES service_principals (id) ON DELETE CASCADE,
    namespace_id         TEXT,
    name                 TEXT NOT NULL,
    secret_hash          BLOB NOT NULL CHECK (length(secret_hash) = 32),
    created_by           TEXT NOT NULL,
    expires_at           TEXT NOT NULL,
    revoked_at           TEXT,
    created_at           TEXT NOT NULL
) STRICT;
CREATE INDEX api_keys_principal_idx ON api_keys (service_principal_id);

CREATE TABLE iam_roles (
    id           TEXT NOT NULL PRIMARY KEY,
    namespace_id TEXT,
    name         TEXT NOT NULL,
    permissions  TEXT NOT NULL CHECK (json_valid(permissions) AND json_type(permissions) = 'array'),
    builtin      INTEGER NOT NULL DEFAULT 0 CHECK (builtin IN (0, 1)),
    created_at   TEXT NOT NULL
) STRICT;

CREATE TABLE iam_access_bindings (
    id            TEXT NOT NULL PRIMARY KEY,
    namespace_id  TEXT,
    subject_id    TEXT NOT NULL,
    role_id       TEXT NOT NULL REFERENCES iam_roles (id) ON DELETE RESTRICT,
    resource_kind TEXT,
    resource_id   TEXT,
    created_at    TEXT NOT NULL,
    CHECK ((resource_kind IS NULL) = (resource_id IS NULL))
) STRICT;
CREATE INDEX iam_access_bindings_subject_idx ON iam_access_bindings (subject_id);
CREATE INDEX iam_access_bindings_role_idx ON iam_access_bindings (role_id);

CREATE TABLE iam_restrictions (
    id            TEXT NOT NULL PRIMARY KEY,
    namespace_id  TEXT,
    subject_id    TEXT NOT NULL,
    action        TEXT NOT NULL,
    resource_kind TEXT NOT NULL,
    resource_id   TEXT,
    effect        TEXT NOT NULL DEFAULT 'deny' CHECK (effect = 'deny'),
    created_at    TEXT NOT NULL
) STRICT;
CREATE INDEX iam_restrictions_subject_idx ON iam_restrictions (subject_id);

-- +goose Down
DROP TABLE iam_restrictions;
DROP TABLE iam_access_bindings;
DROP TABLE iam_roles;
DROP TABLE api_keys;
DROP TABLE service_principals;
DROP TABLE sessions;
DROP TABLE users;
DROP TABLE audit_events;
DROP TABLE workspace_setups;
DROP TABLE controller_work;
DROP TABLE agent_revisions;
DROP TABLE agents;
DROP TABLE configurations;
DROP TABLE namespaces;
DROP TABLE installation;
