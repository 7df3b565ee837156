-- Indexes for the paged lists (ORDER BY created_at, id with a keyset cursor), so a page reads
-- only its own rows instead of scanning and sorting the table. Keep in step with the other
-- engine's 00002 file; internal/store/sqlstore's query-plan test checks both.

-- +goose Up
CREATE INDEX namespaces_created_idx ON namespaces (created_at, id);
CREATE INDEX agents_namespace_created_idx ON agents (namespace_id, created_at, id);
CREATE INDEX configurations_namespace_created_idx ON configurations (namespace_id, created_at, id);
-- Every authenticated request reads its subject's bindings and restrictions in this order; the
-- wider indexes replace the subject-only ones (their prefix) and spare the sort.
DROP INDEX iam_access_bindings_subject_idx;
CREATE INDEX iam_access_bindings_subject_created_idx ON iam_access_bindings (subject_id, created_at, id);
DROP INDEX iam_restrictions_subject_idx;
CREATE INDEX iam_restrictions_subject_created_idx ON iam_restrictions (subject_id, created_at, id);

-- +goose Down
DROP INDEX iam_restrictions_subject_created_idx;
CREATE INDEX iam_restrictions_subject_idx ON iam_restrictions (subject_id);
DROP INDEX iam_access_bindings_subject_created_idx;
CREATE INDEX iam_access_bindings_subject_idx ON iam_access_bindings (subject_id);
DROP INDEX configurations_namespace_created_idx;
DROP INDEX agents_namespace_created_idx;
DROP INDEX namespaces_created_idx;
