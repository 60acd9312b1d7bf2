/**
 * The engine heartbeat (POST /engine/heartbeat, and the socket's heartbeat event): the window's
 * state report in; pending commands, dial requests and its call out. It also reconciles which
 * calls the window really holds: a live call it does not report is flagged orphaned (after a short
 * grace, since a claim may still be in flight), and un-flagged when it reports it again.
 */
import { LIMITS } from '../../../shared/limits.js';
import type { DialRequest, EngineCommand, HeartbeatRequest } from '../../../shared/schemas/engine-api.js';
import type { Clock } from '../../clock.js';
import type { Db, Sql } from '../../store/index.js';
import { Changes } from '../changes.js';
import { LIVE_STATUSES } from '../calls/checks.js';
import type { Commands } from '../commands/service.js';
import type { CallRow, EngineRow } from '../views.js';
import type { EngineContext } from './auth.js';
import { handOverWork } from './work.js';

/** A command the engine acked as done for the first time (device effects follow for simulated engines). */
export interface FirstAck {
  command_id: number;
  kind: EngineCommand['kind'];
  call_id: string | null;
  digits: string | null;
}

export interface HeartbeatResult {
  engine: EngineRow;
  commands: EngineCommand[];
  dialRequests: DialRequest[];
  call: CallRow | null;
  firstAcks: FirstAck[];
  changes: Changes;
}

export async function applyAcks(sql: Sql, engineId: string, acks: HeartbeatRequest['acks'], at: number): Promise<FirstAck[]> {
  const first: FirstAck[] = [];
  for (const ack of acks) {
    const [row] = await sql.query<FirstAck & { acks: number; status: string }>(
      `UPDATE widget_commands SET acks = acks + 1,
         status = CASE WHEN status IN ('queued', 'delivered') THEN $3 ELSE status END,
         error = CASE WHEN status IN ('queued', 'delivered') THEN $4 ELSE error END,
         done_at = coalesce(done_at, $5)
       WHERE id = $1 AND engine_id = $2 RETURNING id AS command_id, kind, call_id, digits, acks, status`,
      [ack.command_id, engineId, ack.result, ack.error ?? null, at],
    );
    if (row && row.acks === 1 && row.status === 'done') first.push({ command_id: Number(row.command_id), kind: row.kind, call_id: row.call_id, digits: row.digits });
  }
  return first;
}

/**
 * Reconciles the engine's live calls with the one the report says it holds, flagging or clearing
 * `orphaned`, and returns the call the window is told about: its live call, else its latest, so
 * it also learns how a call ended. One read serves both.
 */
async function reconcileCalls(sql: Sql, changes: Changes, engine: EngineRow, heldCallId: string | null, at: number): Promise<CallRow | null> {
  const rows = await sql.query<CallRow>(
    `SELECT * FROM call_intents WHERE engine_id = $1 AND status = ANY($2)
     UNION ALL (SELECT * FROM call_intents WHERE engine_id = $1 ORDER BY created_at DESC LIMIT 1)`,
    [engine.id, LIVE_STATUSES],
  );
  const isLive = (call: CallRow) => (LIVE_STATUSES as readonly string[]).includes(call.status);
  const live = rows.filter((call, index) => isLive(call) && rows.findIndex((other) => other.id === call.id) === index);
  for (const call of live) {
    const holds = heldCallId === call.id;
    const since = call.claimed_at ?? call.created_at;
    const orphaned = !holds && at - since > LIMITS.orphanGraceSeconds * 1000;
    if (orphaned !== call.orphaned) {
      await sql.query('UPDATE call_intents SET orphaned = $2 WHERE id = $1', [call.id, orphaned]);
      await changes.touchAgent(sql, call.integration_id, call.member_id);
      call.orphaned = orphaned;
    }
  }
  const newestLive = live.sort((a, b) => b.created_at - a.created_at)[0];
  return newestLive ?? rows.at(-1) ?? null;
}

export async function engineHeartbeat(deps: { db: Db; clock: Clock; commands: Commands }, context: EngineContext, report: HeartbeatRequest): Promise<HeartbeatResult> {
  const changes = new Changes();
  const at = deps.clock.now();
  const result = await deps.db.tx(async (sql) => {
    // Compared with the row as it is now (not the caller's copy, which may be cached and old):
    // a report that changes what widgets show bumps the version.
    const state = report.state === 'ready' && report.mic_ready ? 'ready' : 'enabling';
    const [engine] = await sql.query<EngineRow & { changed: boolean }>(
      `WITH before AS (SELECT id, state, mic_ready, busy, muted FROM engines WHERE id = $1 AND state <> 'closed' FOR UPDATE)
       UPDATE engines e SET state = $2, mic_ready = $3, busy = $4, muted = $5, last_seen_at = $6,
         version = e.version + CASE WHEN (b.state, b.mic_ready, b.busy, b.muted) IS DISTINCT FROM ($2::text, $3::boolean, $4::boolean, $5::boolean) THEN 1 ELSE 0 END
       FROM before b WHERE e.id = b.id
       RETURNING e.*, (b.state, b.mic_ready, b.busy, b.muted) IS DISTINCT FROM ($2::text, $3::boolean, $4::boolean, $5::boolean) AS changed`,
      [context.engine.id, state, report.mic_ready, report.busy, report.muted, at],
    );
    if (!engine) return null;
    if (engine.changed) await changes.touchAgent(sql, engine.integration_id, engine.member_id);
    const firstAcks = await applyAcks(sql, engine.id, report.acks, at);
    const call = await reconcileCalls(sql, changes, engine, report.call_id, at);
    const work = await handOverWork(sql, deps.commands, engine.id, at);
    return { engine, commands: work.commands, dialRequests: work.dial_requests, call, firstAcks };
  });
  if (!result) return { engine: context.engine, commands: [], dialRequests: [], call: null, firstAcks: [], changes };
  return { ...result, changes };
}
