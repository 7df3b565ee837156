-- SQLite only: the Agent and Namespace pages read each row as one packed text column
-- (packed.go), and these indexes hold that very expression after the keyset columns, so a
-- page is read from the index alone: no table lookup per row and no concat_ws per row at
-- read time. They replace the plain keyset indexes of 00002, which are their prefixes.
-- Figures: docs/performance.md, "The pages read from covering indexes on SQLite".
--
-- Each expression must be exactly what packQuery makes of its query's select list
-- (ListAgents in agents.go, namespaceColumns in namespaces.go): SQLite uses an indexed
-- expression in place of the query's only when the two match. If one changes, the
-- query-plan test (TestHotQueryPlans) fails, because the page is no longer read from a
-- covering index. PostgreSQL has no counterpart: an index with INCLUDE columns measured no
-- faster there, as most of a page's time is in its backend, not in the reads.

-- +goose Up
CREATE INDEX agents_page_idx ON agents (namespace_id, created_at, id, concat_ws(char(31),
    ifnull(id, ''), ifnull(name, ''), ifnull(configuration_id, ''), ifnull(status, ''),
    ifnull(desired_runtime_state, ''), ifnull(active_revision_id, ''),
    ifnull(deletion_requested_by, ''), ifnull(created_at, ''), ifnull(updated_at, '')));
DROP INDEX agents_namespace_created_idx;
CREATE INDEX namespaces_page_idx ON namespaces (created_at, id, concat_ws(char(31),
    ifnull(id, ''), ifnull(name, ''), ifnull(status, ''), ifnull(created_at, ''),
    ifnull(updated_at, '')));
DROP INDEX namespaces_created_idx;

-- +goose Down
CREATE INDEX namespaces_created_idx ON namespaces (created_at, id);
DROP INDEX namespaces_page_idx;
CREATE INDEX agents_namespace_created_idx ON agents (namespace_id, created_at, id);
DROP INDEX agents_page_idx;
