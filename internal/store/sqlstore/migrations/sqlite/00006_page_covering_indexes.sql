-- SQLite only: the Agent and Namespace pages read each row as one packed text column
-- (packed.go), and these indexes hold that very expression after the keyset columns, so a
-- page is read from the index alone: no table lookup per row and no packing per row at
-- read time. They replace the plain keyset indexes of 00002, which are their prefixes.
-- Figures: docs/performance.md, "The pages read from covering indexes on SQLite".
--
-- Each expression must be exactly what packQuery makes of its query's select list
-- (packedIndexed in ListAgents, agents.go, and ListNamespaces, namespaces.go): SQLite uses
-- an indexed expression in place of the query's only when the two match. If one changes,
-- the query-plan test (TestHotQueryPlans) fails, because the page is no longer read from a
-- covering index. The expressions use only || and functions every SQLite 3 has, so that
-- older SQLite tools (Debian 12's sqlite3 is 3.40) can still check and change the database;
-- TestSQLiteSchemaReadableByOlderSQLite keeps newer functions out of the schema.
--
-- PostgreSQL has no counterpart: an index with INCLUDE columns measured no faster there, as
-- most of a page's time is in its backend, not in the reads.

-- +goose Up
CREATE INDEX agents_page_idx ON agents (namespace_id, created_at, id,
    ifnull(id, '') || char(31) || ifnull(name, '') || char(31) || ifnull(configuration_id, '')
    || char(31) || ifnull(status, '') || char(31) || ifnull(desired_runtime_state, '')
    || char(31) || ifnull(active_revision_id, '') || char(31) || ifnull(deletion_requested_by, '')
    || char(31) || ifnull(created_at, '') || char(31) || ifnull(updated_at, ''));
DROP INDEX agents_namespace_created_idx;
CREATE INDEX namespaces_page_idx ON namespaces (created_at, id,
    ifnull(id, '') || char(31) || ifnull(name, '') || char(31) || ifnull(status, '')
    || char(31) || ifnull(created_at, '') || char(31) || ifnull(updated_at, ''));
DROP INDEX namespaces_created_idx;

-- +goose Down
CREATE INDEX namespaces_created_idx ON namespaces (created_at, id);
DROP INDEX namespaces_page_idx;
CREATE INDEX agents_namespace_created_idx ON agents (namespace_id, created_at, id);
DROP INDEX agents_page_idx;
