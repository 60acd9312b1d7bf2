-- Why the service asked the provider to end a call (calls/hangup.ts): the provider's callback for
-- that hangup ends the call as the request meant (a window gone offline: failed; an integration
-- revoked while a call rang in: no answer), not as an agent's hang up or decline. Only adds a
-- column: earlier releases ignore it, and a call it is empty on counts as an agent's hang up.
ALTER TABLE call_intents ADD COLUMN hangup_reason text;
