-- Every rule reads a call by its status (live, on an engine, final: api/domain/calls/checks.ts) and
-- its end by its reasons (api/domain/calls/lifecycle.ts, EndReason): a value outside those sets (a
-- misspelling, or one a newer release writes during a rolling upgrade) would leave a call neither
-- live nor ended, held by no rule, its agent free and its wallet share released. Refused instead.
-- NOT VALID: checked on every write from now on, and the rows already there, written by code that
-- writes only these values, are not read (no scan under the table's lock on a live database).
ALTER TABLE call_intents ADD CONSTRAINT call_intents_status_known CHECK (status IN ('queued', 'claimed', 'dialing', 'ringing', 'connected', 'completed', 'rejected', 'busy', 'no_answer', 'canceled', 'failed', 'expired', 'incoming')) NOT VALID;
ALTER TABLE call_intents ADD CONSTRAINT call_intents_end_reason_known CHECK (end_reason IN ('hangup', 'far_end', 'provider', 'expired', 'engine_offline', 'connect_timeout', 'integration_revoked', 'declined', 'time_limit', 'ring_timeout', 'insufficient_balance', 'integration_disabled')) NOT VALID;
ALTER TABLE call_intents ADD CONSTRAINT call_intents_hangup_reason_known CHECK (hangup_reason IN ('hangup', 'far_end', 'provider', 'expired', 'engine_offline', 'connect_timeout', 'integration_revoked', 'declined', 'time_limit', 'ring_timeout', 'insufficient_balance', 'integration_disabled')) NOT VALID;
