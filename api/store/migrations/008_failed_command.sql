-- The newest widget command of the agent that its call window reported it could not carry out (a
-- failed ack), as WidgetState.failed_command shows it: {request_id, kind, error, message,
-- failed_at}. Kept beside the version it bumped, so a state load reads it with the version; its
-- command_id keeps an older failure, recorded late, from replacing a newer one.
ALTER TABLE agent_versions ADD COLUMN failed_command jsonb;
ALTER TABLE agent_versions ADD COLUMN failed_command_id bigint;
