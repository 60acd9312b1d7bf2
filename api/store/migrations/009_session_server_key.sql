-- The server key that created a widget session (every token refreshed from it inherits it): a
-- token whose key was rotated or revoked more than an hour ago is not refreshed, so what a leaked
-- key made ends within that hour and one token lifetime, while the widgets of a backend that has
-- the new key ask it for a new session. Nullable and without a default, so adding it is
-- instant on a live database and a node still on older code keeps inserting rows; a session made
-- before this migration (null) refreshes as it always did.
ALTER TABLE widget_sessions ADD COLUMN server_key_id text;
