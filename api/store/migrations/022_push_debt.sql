-- Changes made by a node cut off from Redis while other nodes are not (api/domain/push-debt.ts):
-- it counts them here, and the other nodes, which read the count every poll_ms, catch up from the
-- store. A sequence: bumped without a row lock, and read without a transaction.
CREATE SEQUENCE push_debt;
