-- A call whose final status callback may be lost is settled from the voice provider's own record
-- of it (calls/provider-records.ts). orphaned_at: when the call's window let go of it (set with
-- `orphaned`, cleared when a window holds it again); its record is read 30 s later, when the
-- callback of a plain hang up has long come. provider_read_at: when a node last read that record,
-- kept on the call so the nodes ticking together read it once, and once a minute at most.
-- Nullable without a default: instant on a live database, and ignored by a node on older code.
ALTER TABLE call_intents ADD COLUMN orphaned_at bigint, ADD COLUMN provider_read_at bigint;
