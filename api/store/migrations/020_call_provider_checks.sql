-- When the reaper last asked the voice provider for its own record of a live call that its window
-- no longer holds (its final status callback may be lost: calls/provider-records.ts). Kept on the call,
-- so the nodes ticking together ask once, and each call is asked about at most once a minute.
-- Nullable without a default: instant on a live database, and ignored by a node on older code.
ALTER TABLE call_intents ADD COLUMN provider_checked_at bigint;
