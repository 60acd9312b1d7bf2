-- Which voice provider carries a call: simulated engines use the simulator even when the
-- service's provider is Twilio, so hangups must go to the right one.
ALTER TABLE call_intents ADD COLUMN provider text NOT NULL DEFAULT 'simulated' CHECK (provider IN ('simulated', 'twilio'));
CREATE INDEX call_intents_engine_live ON call_intents (engine_id) WHERE status IN ('claimed', 'dialing', 'ringing', 'connected', 'incoming');

-- The first answer to a widget command, returned again for a replayed request_id: its status,
-- or the catalogue code it was refused with.
ALTER TABLE widget_commands ADD COLUMN first_status text;
ALTER TABLE widget_commands ADD COLUMN refused text;

-- An engine is registered with the voice provider once it has fetched a voice token; only
-- registered engines are routable for incoming calls (spec section 8).
ALTER TABLE engines ADD COLUMN registered boolean NOT NULL DEFAULT false;
