/**
 * What the store lets go of, run by the reaper (reaper.ts), in batches, one node at a time (an
 * advisory lock per kind).
 *
 * Retention of widget command records (COMMAND_RETENTION_DAYS; off unless set). A record is what
 * makes a request_id run once, so by default every record is kept and the promise holds forever.
 * A call centre at a thousand commands a second writes some 86 million a day, though, and an
 * operator may choose a window instead: records older than it are deleted, and a request_id older
 * than it could run again (set it far beyond any client's retries, which last seconds). A command
 * still waiting for a live call window is kept whatever its age. Once a minute.
 *
 * Dead credentials (always): a widget token or launch ticket that expired over a day ago can never
 * be accepted again, so its row (an id, an origin and a secret's hash) only costs space, and time in
 * the statements that end every session of an integration or an agent. A page load makes a widget
 * session and every 30 minutes it lives makes a token, so a call centre writes hundreds of thousands
 * a day. The day left after expiry keeps a recent refusal explainable from the store. Once an hour.
 *
 * Retention of call records (CALL_RETENTION_DAYS; off unless set). A call's row holds the number
 * called or calling, the contact's name and company and the integrator's metadata: an operator
 * bound to delete such data after a time sets a window, and calls that ended longer ago than it are
 * deleted, once an hour with the dead credentials. The ledger keeps each debit (its call_id set to
 * null), and widget command records keep the call's id (migration 013). A call's row is also what
 * makes its Idempotency-Key answer with it: a key older than the window is new again. A live call
 * is kept whatever its age. An agent whose last shown call went has its WidgetState version
 * bumped: every node then reads it again (the ETag would otherwise stay while what it tags changed).
 */
import type { Db } from '../store/index.js';
import { agentVersionBump } from './agent-state.js';
import { LIVE_STATUS_LIST } from './calls/checks.js';
import type { Changes } from './changes.js';

export const PRUNE_EVERY_MS = 60_000;
/** rows looked at per statement, and statements per pass: up to 200,000 rows a minute, 3,333 a second */
const BATCH = 10_000;
const BATCHES_PER_PASS = 20;

/**
 * Ids come from one sequence as commands are recorded, so the oldest records are the lowest ids:
 * each statement takes the BATCH lowest after the last one it looked at (the primary key's order,
 * no index of their own to keep up on the INSERT every command makes) and deletes those older than
 * the cutoff. It reports whether it reached records younger than that, where the pass can stop,
 * and the last id it looked at: the next statement goes on from there, so a batch of records kept
 * (commands still waiting for a live window) never hides the older ones behind it.
 */
const PRUNE = `WITH head AS (
    SELECT id, created_at, status, engine_id FROM widget_commands WHERE id > $2 ORDER BY id LIMIT ${BATCH}
  ), gone AS (
    DELETE FROM widget_commands c USING head h
    WHERE c.id = h.id AND h.created_at < $1
      AND NOT (h.status IN ('queued', 'delivered')
        AND EXISTS (SELECT 1 FROM engines e WHERE e.id = h.engine_id AND e.state IN ('enabling', 'ready')))
    RETURNING 1
  ) SELECT (SELECT count(*)::int FROM gone) AS deleted,
      (SELECT count(*)::int FROM head) < ${BATCH} OR (SELECT max(created_at) FROM head) >= $1 AS reached,
      (SELECT max(id) FROM head) AS last_id`;

/** Deletes the command records older than the retention window; returns how many. */
export async function pruneCommands(db: Db, now: number, retentionMs: number): Promise<number> {
  let pruned = 0;
  let after = 0;
  for (let batch = 0; batch < BATCHES_PER_PASS; batch += 1) {
    const [row] = await db.tx((sql) => sql.query<{ deleted: number; reached: boolean; last_id: number | null }>(PRUNE, [now - retentionMs, after]), {
      lock: 'c2c:prune-commands',
    });
    pruned += row?.deleted ?? 0;
    if (!row || row.reached || row.last_id === null) break;
    after = Number(row.last_id);
  }
  return pruned;
}

export const PRUNE_CREDENTIALS_EVERY_MS = 3_600_000;
/** after a pass that stopped at its bound (a backlog, as after an upgrade), the next comes this soon */
export const PRUNE_CREDENTIALS_BACKLOG_MS = 60_000;
/** how long a dead credential's row stays after it expired */
export const DEAD_CREDENTIAL_KEPT_MS = 24 * 3_600_000;
/** rows per statement, and statements per pass of each kind: some 0.6 s of a reaper tick when catching up */
const CREDENTIAL_BATCH = 5_000;
const CREDENTIAL_BATCHES_PER_PASS = 4;

/**
 * The widget tokens expired before $1. A session's first token (family_id null) also names the
 * session that revoke ends whole (sessions.ts), so it stays while any token refreshed from it is
 * younger; the others go with no such check. The launch tickets of a token go with it (ON DELETE
 * CASCADE). There is no index on expires_at: the table is scanned once an hour, which costs less
 * than keeping one up on every page load, and building one on a large live table would hold up
 * logins while it ran (migrations run in one transaction, so not CONCURRENTLY).
 */
const PRUNE_WIDGET_TOKENS = `/* scans by design: once an hour */ WITH dead AS (
    SELECT s.id FROM widget_sessions s
    WHERE s.expires_at < $1
      AND (s.family_id IS NOT NULL
        OR NOT EXISTS (SELECT 1 FROM widget_sessions r WHERE r.family_id = s.id AND r.expires_at >= $1))
    LIMIT ${CREDENTIAL_BATCH}
  ), gone AS (
    DELETE FROM widget_sessions w USING dead d WHERE w.id = d.id RETURNING 1
  ) SELECT count(*)::int AS deleted FROM gone`;

/** Launch tickets expired before $1, those of a session still alive (refreshed for days) too. */
const PRUNE_LAUNCH_TICKETS = `/* scans by design: once an hour */ WITH gone AS (
    DELETE FROM launch_tickets WHERE id IN (SELECT id FROM launch_tickets WHERE expires_at < $1 LIMIT ${CREDENTIAL_BATCH}) RETURNING 1
  ) SELECT count(*)::int AS deleted FROM gone`;

/**
 * Deletes widget tokens and launch tickets that expired over a day ago, a bounded number of each
 * per pass, so that a backlog (as after an upgrade: 20,000 of each a minute) does not hold up the
 * reaper's other rules for long; `more` says a pass stopped at that bound.
 */
export async function pruneDeadCredentials(db: Db, now: number): Promise<{ pruned: number; more: boolean }> {
  let pruned = 0;
  let more = false;
  // tickets first: those of live sessions go, and the sessions' cascade finds fewer
  for (const [statement, lock] of [
    [PRUNE_LAUNCH_TICKETS, 'c2c:prune-launch-tickets'],
    [PRUNE_WIDGET_TOKENS, 'c2c:prune-widget-tokens'],
  ] as const) {
    for (let batch = 0; ; batch += 1) {
      const [row] = await db.tx((sql) => sql.query<{ deleted: number }>(statement, [now - DEAD_CREDENTIAL_KEPT_MS]), { lock });
      pruned += row?.deleted ?? 0;
      if (!row || row.deleted < CREDENTIAL_BATCH) break;
      if (batch + 1 === CREDENTIAL_BATCHES_PER_PASS) {
        more = true;
        break;
      }
    }
  }
  return { pruned, more };
}

/**
 * Calls ended before $1. No index on ended_at: the table is scanned once an hour, as the dead
 * credentials' are, rather than one more index kept up on every call's every change.
 */
const PRUNE_CALLS = `/* scans by design: once an hour */
  DELETE FROM call_intents WHERE id IN (
    SELECT id FROM call_intents WHERE status NOT IN (${LIVE_STATUS_LIST}) AND coalesce(ended_at, created_at) < $1 LIMIT ${CREDENTIAL_BATCH}
  ) RETURNING integration_id, member_id, created_at`;

/**
 * Of the agents whose calls went (each with the newest one that went), those left with no call as
 * new: the last call their WidgetState showed was one of them. An agent with a newer call shows
 * that one still, and is not bumped (a pass deletes thousands of calls an hour).
 */
const SHOWN_CALL_GONE = `SELECT g.i, g.m FROM unnest($1::text[], $2::text[], $3::bigint[]) AS g(i, m, newest)
  WHERE NOT EXISTS (SELECT 1 FROM call_intents c WHERE c.integration_id = g.i AND c.member_id = g.m AND c.created_at >= g.newest)`;

/**
 * Deletes the calls that ended longer ago than the retention window, a bounded number per pass, and
 * bumps their agents' versions (recorded in `changes`, published by the caller); `more` says a pass
 * stopped at that bound.
 */
export async function pruneCalls(db: Db, changes: Changes, now: number, retentionMs: number): Promise<{ pruned: number; more: boolean }> {
  let pruned = 0;
  for (let batch = 0; batch < CREDENTIAL_BATCHES_PER_PASS; batch += 1) {
    const deleted = await db.tx(
      async (sql) => {
        const gone = await sql.query<{ integration_id: string; member_id: string; created_at: number }>(PRUNE_CALLS, [now - retentionMs]);
        const newestGone = new Map<string, { integration_id: string; member_id: string; created_at: number }>();
        for (const row of gone) {
          const key = `${row.integration_id}:${row.member_id}`;
          if (Number(row.created_at) > Number(newestGone.get(key)?.created_at ?? -Infinity)) newestGone.set(key, row);
        }
        const agents = [...newestGone.values()];
        if (agents.length > 0) {
          const bumped = await sql.query<{ integration_id: string; member_id: string; version: number }>(agentVersionBump(SHOWN_CALL_GONE), [
            agents.map((agent) => agent.integration_id),
            agents.map((agent) => agent.member_id),
            agents.map((agent) => Number(agent.created_at)),
          ]);
          for (const row of bumped) changes.agentTouched(row.integration_id, row.member_id, row.version);
        }
        return gone.length;
      },
      { lock: 'c2c:prune-calls' },
    );
    pruned += deleted;
    if (deleted < CREDENTIAL_BATCH) return { pruned, more: false };
  }
  return { pruned, more: true };
}
