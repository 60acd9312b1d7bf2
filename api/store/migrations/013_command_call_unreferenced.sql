-- A widget command names the call it was for without a foreign key. Deleting a call (retention:
-- CALL_RETENTION_DAYS) with one had PostgreSQL set every command's call_id naming it to null, by a
-- scan of widget_commands per call deleted (no index on call_id, the hottest insert table, and one
-- built now would hold up every command while it was): a backlog's pass never finished within its
-- statement timeout. The foreign key also made each command recorded for a call wait on that
-- call's row while a provider callback held it. A command record keeps the id of a call deleted
-- since; nothing reads the call through it but a replay of a hangup never settled, which then
-- finds no call and answers not_found. Dropping the key locks both tables for a moment (within the
-- migrations' lock wait, api/store/migrate.ts).
ALTER TABLE widget_commands DROP CONSTRAINT IF EXISTS widget_commands_call_id_fkey;
