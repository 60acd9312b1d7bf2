-- WidgetState shows an agent's open engine, else its newest, and its unended call, else its newest.
-- Every engine ever paired and every call stay in their tables, so each of these reads would
-- otherwise go through all of an agent's history; with these indexes each reads one row.
CREATE INDEX engines_agent_latest ON engines (integration_id, member_id, created_at DESC);
CREATE INDEX call_intents_agent_unended ON call_intents (integration_id, member_id, created_at DESC) WHERE ended_at IS NULL;
