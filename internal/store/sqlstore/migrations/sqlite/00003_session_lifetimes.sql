-- Sessions get a public id (ses_<uuid>: listed and revoked by their user without exposing the
-- token hash) and the time they were last used (idle timeout); API keys record their last use.
-- Keep in step with ../postgres/00003_session_lifetimes.sql.
--
-- Sessions that exist before this migration have neither, so they are ended: their users sign
-- in again. last_used_at is written at most once a minute per session and per key (the UPDATE
-- carries the condition), so the columns cost one write per credential per minute at most.

-- +goose Up
DELETE FROM sessions;
ALTER TABLE sessions ADD COLUMN id TEXT NOT NULL DEFAULT '' CHECK (id LIKE 'ses\_%' ESCAPE '\');
ALTER TABLE sessions ADD COLUMN last_used_at TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX sessions_id_idx ON sessions (id);
ALTER TABLE api_keys ADD COLUMN last_used_at TEXT;
CREATE INDEX api_keys_created_by_idx ON api_keys (created_by);

-- +goose Down
DROP INDEX api_keys_created_by_idx;
ALTER TABLE api_keys DROP COLUMN last_used_at;
DROP INDEX sessions_id_idx;
DELETE FROM sessions;
ALTER TABLE sessions DROP COLUMN last_used_at;
ALTER TABLE sessions DROP COLUMN id;
