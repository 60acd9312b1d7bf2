-- A call window whose pairing answer was lost (a timeout, a dropped connection) asks again with
-- the same ticket and the attempt id it sent the first time: it is answered with the engine that
-- pairing made, under a new token (engines/pair.ts). Only adds columns: earlier releases ignore them.
ALTER TABLE launch_tickets ADD COLUMN pair_attempt text;
ALTER TABLE launch_tickets ADD COLUMN engine_id text;
