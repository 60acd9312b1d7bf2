-- Every heartbeat tells the window its latest call (live first): an engine's calls, newest first,
-- without scanning the table as it grows.
CREATE INDEX call_intents_engine_latest ON call_intents (engine_id, created_at DESC);
