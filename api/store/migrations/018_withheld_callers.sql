-- An incoming call from a caller who withholds the number (Twilio's From: anonymous) has none:
-- it rings like any other, and its Display.number is null (api/routes/provider/incoming.ts).
-- Outgoing calls always have one (POST /calls checks it).
ALTER TABLE call_intents ALTER COLUMN phone_number DROP NOT NULL;
