/**
 * Retention of widget command records (COMMAND_RETENTION_DAYS; off unless set). A record is what
 * makes a request_id run once, so by default every record is kept and the promise holds forever.
 * A call centre at a thousand commands a second writes some 86 million a day, though, and an
 * operator may choose a window instead: records older than it are deleted, and a request_id older
 * than it could run again (set it far beyond any client's retries, which last seconds). A command
 * still waiting for a live call window is kept whatever its age.
 *
 * Run by the reaper once a minute, in batches, one node at a time (an advisory lock).
 */
import type { Db } from '../store/index.js';

export const PRUNE_EVERY_MS = 60_000;
/** rows looked at per statement, and statements per pass: up to 200,000 rows a minute, 3,333 a second */
const BATCH = 10_000;
const BATCHES_PER_PASS = 20;

/**
 * Ids come from one sequence as commands are recorded, so the oldest records are the lowest ids:
 * each statement takes the BATCH lowest (the primary key's order, no index of their own to keep
 * up on the INSERT every command makes) and deletes those older than the cutoff. It reports
 * whether it reached records younger than that, where the pass can stop.
 */
const PRUNE = `WITH head AS (
    SELECT id, created_at, status, engine_id FROM widget_commands ORDER BY id LIMIT ${BATCH}
  ), gone AS (
    DELETE FROM widget_commands c USING head h
    WHERE c.id = h.id AND h.created_at < $1
      AND NOT (h.status IN ('queued', 'delivered')
        AND EXISTS (SELECT 1 FROM engines e WHERE e.id = h.engine_id AND e.state IN ('enabling', 'ready')))
    RETURNING 1
  ) SELECT (SELECT count(*)::int FROM gone) AS deleted,
      (SELECT count(*)::int FROM head) < ${BATCH} OR (SELECT max(created_at) FROM head) >= $1 AS reached`;

/** Deletes the command records older than the retention window; returns how many. */
export async function pruneCommands(db: Db, now: number, retentionMs: number): Promise<number> {
  let pruned = 0;
  for (let batch = 0; batch < BATCHES_PER_PASS; batch += 1) {
    const [row] = await db.tx((sql) => sql.query<{ deleted: number; reached: boolean }>(PRUNE, [now - retentionMs]), { lock: 'c2c:prune-commands' });
    pruned += row?.deleted ?? 0;
    if (!row || row.reached || row.deleted === 0) break;
  }
  return pruned;
}
