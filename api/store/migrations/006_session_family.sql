-- A widget session is every token refreshed from its first one: revoking it (logout) ends them all,
-- including a token minted from an older one during its grace after a refresh. family_id is the id
-- of the session's first token.
ALTER TABLE widget_sessions ADD COLUMN family_id text;
UPDATE widget_sessions SET family_id = id;
ALTER TABLE widget_sessions ALTER COLUMN family_id SET NOT NULL;
CREATE INDEX widget_sessions_family ON widget_sessions (family_id) WHERE revoked_at IS NULL;
