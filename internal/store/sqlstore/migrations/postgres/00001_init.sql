-- OCC schema, PostgreSQL flavour. Keep in step with ../sqlite/00001_init.sql: the two files
-- create the same tables, columns, keys and rules; only types and trigger syntax differ.
--
-- Conventions: ids are text ("<prefix><uuid>"); times are timestamptz written by the
-- application in UTC with microsecond precision; optional strings are NULL, never ''.
-- Rule violations raised by triggers use SQLSTATE 23514 (check_violation) so that callers
-- see one class for "the database refused this row".

-- +goose Up

-- installation is a singleton: the boolean key can only ever be TRUE.
CREATE TABLE installation (
    id         text PRIMARY KEY,
    singleton  boolean NOT NULL DEFAULT TRUE UNIQUE CHECK (singleton),
    name       text NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE TABLE namespaces (
    id         text PRIMARY KEY,
    name       text NOT NULL UNIQUE,
    status     text NOT NULL CHECK (status IN ('provisioning', 'ready', 'failed', 'deleting')),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- document is json, not jsonb: it is the operator's native OpenClaw document and is returned
-- byte for byte (jsonb would reorder keys and drop whitespace).
CREATE TABLE configurations (
    id           text PRIMARY KEY,
    namespace_id text NOT NULL REFERENCES namespaces (id) ON DELETE RESTRICT,
    name         text NOT NULL,
    kind         text NOT NULL CHECK (kind = 'agent'),
    document     json NOT NULL CHECK (json_typeof(document) = 'object'),
    generation   bigint NOT NULL CHECK (generation >= 1),
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    CONSTRAINT configurations_name_key UNIQUE (namespace_id, name),
    -- Target of agents' composite foreign key: an Agent can only use a Configuration of its
    -- own Namespace.
    CONSTRAINT configurations_namespace_id_key UNIQUE (namespace_id, id)
);

-- active_revision_id has no foreign key: revisions reference agents, and a cycle would make
-- deleting an Agent (which cascades to its revisions) depend on constraint timing.
CREATE TABLE agents (
    id                    text PRIMARY KEY,
    namespace_id          text NOT NULL REFERENCES namespaces (id) ON DELETE RESTRICT,
    name                  text NOT NULL,
    configuration_id      text NOT NULL,
    status                text NOT NULL CHECK (status IN ('active', 'deleting')),
    desired_runtime_state text NOT NULL CHECK (desired_runtime_state IN ('running', 'stopped')),
    active_revision_id    text,
    deletion_requested_by text,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    CONSTRAINT agents_name_key UNIQUE (namespace_id, name),
    -- Target of the composite foreign keys of agent_revisions and workspace_setups.
    CONSTRAINT agents_namespace_id_key UNIQUE (namespace_id, id),
    CONSTRAINT agents_configuration_fkey FOREIGN KEY (namespace_id, configuration_id)
        REFERENCES configurations (namespace_id, id) ON UPDATE RESTRICT ON DELETE RESTRICT
);
CREATE INDEX agents_configuration_idx ON agents (namespace_id, configuration_id);

-- agent_revisions are immutable snapshots: rows are inserted and (with their Agent) deleted,
-- never updated.
CREATE TABLE agent_revisions (
    id                       text PRIMARY KEY,
    namespace_id             text NOT NULL,
    agent_id                 text NOT NULL,
    revision_number          bigint NOT NULL CHECK (revision_number >= 1),
    configuration_id         text NOT NULL,
    configuration_kind       text NOT NULL,
    configuration_generation bigint NOT NULL CHECK (configuration_generation >= 1),
    configuration            json NOT NULL,
    compute_driver_id        text NOT NULL,
    created_by               text NOT NULL,
    created_at               timestamptz NOT NULL,
    CONSTRAINT agent_revisions_number_key UNIQUE (namespace_id, agent_id, revision_number),
    CONSTRAINT agent_revisions_agent_fkey FOREIGN KEY (namespace_id, agent_id)
        REFERENCES agents (namespace_id, id) ON UPDATE RESTRICT ON DELETE CASCADE
);

-- +goose StatementBegin
CREATE FUNCTION occ_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME USING ERRCODE = '23514';
END
$$;
-- +goose StatementEnd

CREATE TRIGGER agent_revisions_immutable BEFORE UPDATE ON agent_revisions
    FOR EACH ROW EXECUTE FUNCTION occ_refuse_update();

-- controller_work is the deployment worker's queue. namespace_id/agent_id/revision_id carry no
-- foreign keys on purpose: teardown work must outlive the Agent row it removes.
CREATE TABLE controller_work (
    id               text PRIMARY KEY,
    work_kind        text NOT NULL,
    idempotency_key  text NOT NULL UNIQUE,
    namespace_id     text,
    agent_id         text,
    revision_id      text,
    actor_id         text,
    state            text NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'succeeded', 'failed_permanent', 'cancelled')),
    available_at     timestamptz NOT NULL,
    attempt_count    integer NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
    claim_token      text,
    lease_expires_at timestamptz,
    completed_at     timestamptz,
    reason_code      text,
    last_error       text,
    progress         jsonb,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);
-- Claiming scans queued (and lease-expired running) work by due time.
CREATE INDEX controller_work_claim_idx ON controller_work (state, available_at);
CREATE INDEX controller_work_agent_idx ON controller_work (namespace_id, agent_id);

-- workspace_setups: the private staging record of an Agent's initial workspace files.
-- workspace_setup_files_valid is the "files_valid" rule: a non-empty JSON object whose keys are
-- only the four workspace file names and whose values are strings of at most 16384 UTF-8 bytes.
-- The CASE makes sure jsonb_each only ever sees an object.
-- +goose StatementBegin
CREATE FUNCTION workspace_setup_files_valid(files jsonb) RETURNS boolean
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN files IS NULL OR jsonb_typeof(files) <> 'object' OR files = '{}'::jsonb THEN FALSE
        ELSE NOT EXISTS (
            SELECT 1
            FROM jsonb_each(files) AS f (name, content)
            WHERE f.name NOT IN ('AGENTS.md', 'SOUL.md', 'IDENTITY.md', 'USER.md')
               OR jsonb_typeof(f.content) <> 'string'
               OR octet_length(f.content #>> '{}') > 16384)
    END
$$;
-- +goose StatementEnd

CREATE TABLE workspace_setups (
    id           text PRIMARY KEY CHECK (char_length(id) BETWEEN 1 AND 200),
    namespace_id text NOT NULL,
    agent_id     text NOT NULL,
    defaults_id  text CHECK (defaults_id ~ '^[a-f0-9]{64}$'),
    files        jsonb,
    completed    boolean NOT NULL DEFAULT FALSE,
    CONSTRAINT workspace_setups_agent_key UNIQUE (namespace_id, agent_id),
    CONSTRAINT workspace_setups_agent_fkey FOREIGN KEY (namespace_id, agent_id)
        REFERENCES agents (namespace_id, id) ON UPDATE RESTRICT ON DELETE CASCADE,
    CONSTRAINT workspace_setups_files_check CHECK (
        (completed AND files IS NULL) OR (NOT completed AND workspace_setup_files_valid(files)))
);

-- The lifecycle rules the CHECK cannot express (they compare OLD with NEW or read agents).
-- The agent row is locked FOR SHARE so that it cannot switch to 'deleting' between this check
-- and the commit of the insert.
-- +goose StatementBegin
CREATE FUNCTION workspace_setups_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.completed THEN
            RAISE EXCEPTION 'workspace setup must be created pending' USING ERRCODE = '23514';
        END IF;
        PERFORM 1 FROM agents a
            WHERE a.namespace_id = NEW.namespace_id AND a.id = NEW.agent_id AND a.status = 'active'
            FOR SHARE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'workspace setup requires an active agent' USING ERRCODE = '23514';
        END IF;
        RETURN NEW;
    END IF;

    IF NEW.id IS DISTINCT FROM OLD.id
        OR NEW.namespace_id IS DISTINCT FROM OLD.namespace_id
        OR NEW.agent_id IS DISTINCT FROM OLD.agent_id
        OR NEW.defaults_id IS DISTINCT FROM OLD.defaults_id THEN
        RAISE EXCEPTION 'workspace setup identity is immutable' USING ERRCODE = '23514';
    END IF;
    IF OLD.completed THEN
        RAISE EXCEPTION 'completed workspace setup is immutable' USING ERRCODE = '23514';
    END IF;
    IF NOT NEW.completed AND NEW.files IS DISTINCT FROM OLD.files THEN
        RAISE EXCEPTION 'pending workspace setup files cannot change' USING ERRCODE = '23514';
    END IF;
    IF NEW.completed AND NEW.files IS NOT NULL THEN
        RAISE EXCEPTION 'completing a workspace setup must clear its files' USING ERRCODE = '23514';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER workspace_setups_guard BEFORE INSERT OR UPDATE ON workspace_setups
    FOR EACH ROW EXECUTE FUNCTION workspace_setups_guard();

-- audit_events is append-only: triggers refuse UPDATE, DELETE and TRUNCATE.
-- id uses the "C" collation: it breaks ties between equal timestamps in the list order and the
-- pagination cursor, which must be plain byte order as on SQLite, whatever the database locale.
CREATE TABLE audit_events (
    id            text COLLATE "C" PRIMARY KEY,
    occurred_at   timestamptz NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('bootstrap', 'mutation', 'access', 'authorization_denial')),
    actor_id      text NOT NULL,
    credential    text,
    request_id    text,
    action        text NOT NULL,
    namespace_id  text,
    resource_kind text,
    resource_id   text,
    outcome       text NOT NULL CHECK (outcome IN ('success', 'denied', 'failure')),
    reason_code   text,
    details       jsonb CHECK (details IS NULL OR jsonb_typeof(details) = 'object')
);
-- Listing is newest first by (occurred_at, id); the filtered indexes serve the selective
-- filters (Namespace, resource, actor). kind/action/outcome filters ride the ordered scan.
CREATE INDEX audit_events_order_idx ON audit_events (occurred_at DESC, id DESC);
CREATE INDEX audit_events_namespace_idx ON audit_events (namespace_id, occurred_at DESC, id DESC);
CREATE INDEX audit_events_resource_idx ON audit_events (resource_kind, resource_id, occurred_at DESC, id DESC);
CREATE INDEX audit_events_actor_idx ON audit_events (actor_id, occurred_at DESC, id DESC);

-- +goose StatementBegin
CREATE FUNCTION occ_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only (% refused)', TG_TABLE_NAME, TG_OP USING ERRCODE = '23514';
END
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION occ_refuse_change();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION occ_refuse_change();

-- users.email keeps what the user typed; email_key is its lower-case form, computed by the
-- application, and carries the case-insensitive uniqueness (one rule for both engines, where
-- lower() would differ for non-ASCII text).
CREATE TABLE users (
    id            text PRIMARY KEY,
    email         text NOT NULL,
    email_key     text NOT NULL,
    password_hash text NOT NULL,
    created_at    timestamptz NOT NULL,
    CONSTRAINT users_email_key UNIQUE (email_key)
);

-- Only the SHA-256 of a session token is stored.
CREATE TABLE sessions (
    token_hash bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
    user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX sessions_user_idx ON sessions (user_id);
CREATE INDEX sessions_expires_idx ON sessions (expires_at);

-- namespace_id/agent_id are scoping labels without foreign keys: IAM rows are removed by the
-- domain code that removes their Namespace or Agent.
CREATE TABLE service_principals (
    id           text PRIMARY KEY,
    name         text NOT NULL,
    namespace_id text,
    agent_id     text,
    created_at   timestamptz NOT NULL
);

CREATE TABLE api_keys (
    id                   text PRIMARY KEY,
    service_principal_id text NOT NULL REFERENCES service_principals (id) ON DELETE CASCADE,
    namespace_id         text,
    name                 text NOT NULL,
    secret_hash          bytea NOT NULL CHECK (octet_length(secret_hash) = 32),
    created_by           text NOT NULL,
    expires_at           timestamptz NOT NULL,
    revoked_at           timestamptz,
    created_at           timestamptz NOT NULL
);
CREATE INDEX api_keys_principal_idx ON api_keys (service_principal_id);

CREATE TABLE iam_roles (
    id           text PRIMARY KEY,
    namespace_id text,
    name         text NOT NULL,
    permissions  jsonb NOT NULL CHECK (jsonb_typeof(permissions) = 'array'),
    builtin      boolean NOT NULL DEFAULT FALSE,
    created_at   timestamptz NOT NULL
);

-- subject_id names a user or a service principal, so it cannot carry a foreign key; deleting a
-- service principal deletes its bindings and restrictions explicitly.
CREATE TABLE iam_access_bindings (
    id            text PRIMARY KEY,
    namespace_id  text,
    subject_id    text NOT NULL,
    role_id       text NOT NULL REFERENCES iam_roles (id) ON DELETE RESTRICT,
    resource_kind text,
    resource_id   text,
    created_at    timestamptz NOT NULL,
    -- A binding is installation-wide, Namespace-wide or on one exact resource.
    CONSTRAINT iam_access_bindings_resource_check CHECK ((resource_kind IS NULL) = (resource_id IS NULL))
);
CREATE INDEX iam_access_bindings_subject_idx ON iam_access_bindings (subject_id);
CREATE INDEX iam_access_bindings_role_idx ON iam_access_bindings (role_id);

CREATE TABLE iam_restrictions (
    id            text PRIMARY KEY,
    namespace_id  text,
    subject_id    text NOT NULL,
    action        text NOT NULL,
    resource_kind text NOT NULL,
    resource_id   text,
    effect        text NOT NULL DEFAULT 'deny' CHECK (effect = 'deny'),
    created_at    timestamptz NOT NULL
);
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
DROP FUNCTION occ_refuse_change();
DROP TABLE workspace_setups;
DROP FUNCTION workspace_setups_guard();
DROP FUNCTION workspace_setup_files_valid(jsonb);
DROP TABLE controller_work;
DROP TABLE agent_revisions;
DROP FUNCTION occ_refuse_update();
DROP TABLE agents;
DROP TABLE configurations;
DROP TABLE namespaces;
DROP TABLE installation;
