-- When the reaper may next ask the provider to end a call whose window went silent, and the wait
-- it set (doubling from 2 s to 60 s while the provider cannot be reached). Kept on the call, so
-- every API node shares one backoff and one claim: nodes ticking together ask the provider once,
-- not once each, and a node that restarts does not start the backoff over. Nullable without a
-- default: instant on a live database, and ignored by a node still on older code.
ALTER TABLE call_intents ADD COLUMN abandoned_retry_at bigint, ADD COLUMN abandoned_retry_ms integer;
