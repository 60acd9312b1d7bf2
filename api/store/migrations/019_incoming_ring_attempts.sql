-- An incoming Twilio call that its agent lets ring out, or declines, rings the next routable agent
-- (the <Dial action> webhook, api/routes/provider/incoming.ts): one caller's leg (CallSid) then
-- carries one intent per agent rung, numbered in order. The pair stays unique, so the same webhook
-- asked twice still records one ring; an outgoing call's CallSid, always ring 1, stays unique.
ALTER TABLE call_intents ADD COLUMN ring_attempt smallint NOT NULL DEFAULT 1;
DROP INDEX call_intents_provider_sid;
CREATE UNIQUE INDEX call_intents_provider_sid ON call_intents (provider_call_sid, ring_attempt) WHERE provider_call_sid IS NOT NULL;
