-- A widget session is every token refreshed from its first one: revoking it (logout) ends them all,
-- including a token minted from an older one during its grace after a refresh. family_id is the id
-- of the session's first token, set on tokens made by a refresh; a first token (and every row made
-- before this migration) leaves it null, its own id naming the session. So adding it is instant on
-- a live database (no rewrite, no backfill), and a node still on older code, which inserts rows
-- without it, keeps working during a rolling upgrade. The index holds only refreshed tokens.
ALTER TABLE widget_sessions ADD COLUMN family_id text;
CREATE INDEX widget_sessions_family ON widget_sessions (family_id) WHERE family_id IS NOT NULL;
