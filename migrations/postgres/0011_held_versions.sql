-- 0011: held mail that strands nothing and a 200 that always wins (issue 26).
--
-- messages.version counts the changes of a held message: 1 when it is
-- accepted held, one more for every reschedule, cancel, queueing and claim.
-- A dispatch claims the message only at the version it read, so a
-- reschedule or cancel answered 200 is never overtaken by a job dispatched
-- for the message as it was. A message never held keeps 0.
ALTER TABLE messages ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
UPDATE messages SET version = 1 WHERE scheduled_at IS NOT NULL OR next_attempt_at IS NOT NULL
    OR status IN ('scheduled', 'queued', 'canceled');

-- send_log.waiting is true while a send waits for the provider (a
-- connection, a concurrency slot) and false from the moment its bytes may
-- start going. A send a dead server left in flight is "delivery unknown"
-- only if it was not waiting; one that was is given back: a held message
-- is queued again, a direct one fails as not sent.
ALTER TABLE send_log ADD COLUMN waiting BOOLEAN NOT NULL DEFAULT FALSE;
