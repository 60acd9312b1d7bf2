-- Deleting a widget session row deletes its launch tickets (ON DELETE CASCADE), which looks them up
-- by session: without this index every deleted session scanned the whole tickets table, so pruning
-- dead sessions (api/domain/retention.ts) a batch at a time would have scanned it thousands of
-- times. Building it holds up writes to launch_tickets (Enable calls, pairing) for as long as the
-- build takes; the table holds one row per Enable calls click, so that is seconds at most.
CREATE INDEX launch_tickets_session ON launch_tickets (widget_session_id);
