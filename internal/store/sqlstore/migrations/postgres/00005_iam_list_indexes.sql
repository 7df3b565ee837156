-- Indexes for the paged IAM lists (ORDER BY created_at, id with a keyset cursor), so a page
-- reads only its own rows instead of scanning and sorting the table. Revisions page by their
-- number on the existing (namespace_id, agent_id, revision_number) key. Keep in step with
-- ../sqlite/00005_iam_list_indexes.sql; internal/store/sqlstore's query-plan test checks both.

-- +goose Up
CREATE INDEX service_principals_created_idx ON service_principals (created_at, id);
CREATE INDEX iam_roles_created_idx ON iam_roles (created_at, id);
CREATE INDEX iam_access_bindings_created_idx ON iam_access_bindings (created_at, id);
CREATE INDEX iam_restrictions_created_idx ON iam_restrictions (created_at, id);

-- +goose Down
DROP INDEX iam_restrictions_created_idx;
DROP INDEX iam_access_bindings_created_idx;
DROP INDEX iam_roles_created_idx;
DROP INDEX service_principals_created_idx;
