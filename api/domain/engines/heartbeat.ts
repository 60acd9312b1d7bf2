/**
 * The engine heartbeat (POST /engine/heartbeat, and the socket's heartbeat event): the window's
 * state report in; pending commands, dial requests and its call out. It also reconciles which
 * calls the window really holds: a live call it does not report is flagged orphaned (after a short
 * grace, since a claim may still be in flight), and un-flagged when it reports it again.
 */
import { LIMITS } from '../../../shared/limits.js';
import type { DialRequest, EngineCommand, HeartbeatRequest } from '../../../shared/schemas/engine-api.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../store/index.js';
import { agentVersionBump } from '../agent-state.js';
import { Changes } from '../changes.js';
import { LIVE_STATUSES } from '../calls/checks.js';
import type { Commands } from '../commands/service.js';
import { callJson, engineJson, type CallRow, type EngineRow } from '../views.js';
import { ackParams, ackUpdate, firstAcks, type AckedRow, type FirstAck } from './acks.js';
import type { EngineContext } from './auth.js';
import { toWork, WORK_COLUMNS, workCtes, type WorkColumns } from './work.js';

export interface HeartbeatResult {
  engine: EngineRow;
  commands: EngineCommand[];
  dialRequests: DialRequest[];
  call: CallRow | null;
  firstAcks: FirstAck[];
  changes: Changes;
}

interface ReportRow extends WorkColumns {
  engine: (EngineRow & { changed: boolean }) | null;
  version: number | null;
  acked: AckedRow[];
  calls: CallRow[];
}

/**
 * The whole report in one statement: the engine's row updated (its version bumped, and its
 * agent's, when what widgets show changed), acks applied, work handed over, and the engine's live
 * calls and its latest read. Nothing happens for an engine that is closed. Compared with the row
 * as it is now, not the caller's copy, which may be cached and old.
 */
const REPORT = `WITH before AS (
    SELECT id, state, mic_ready, busy, muted FROM engines WHERE id = $1 AND state <> 'closed' FOR UPDATE
  ), engine AS (
    UPDATE engines e SET state = $2, mic_ready = $3, busy = $4, muted = $5, last_seen_at = $6,
      version = e.version + CASE WHEN (b.state, b.mic_ready, b.busy, b.muted) IS DISTINCT FROM ($2::text, $3::boolean, $4::boolean, $5::boolean) THEN 1 ELSE 0 END
    FROM before b WHERE e.id = b.id
    RETURNING e.*, (b.state, b.mic_ready, b.busy, b.muted) IS DISTINCT FROM ($2::text, $3::boolean, $4::boolean, $5::boolean) AS changed
  ), bumped AS (
    ${agentVersionBump('SELECT integration_id, member_id FROM engine WHERE changed')}
  ), acked AS (
    ${ackUpdate({ engines: '$7', ids: '$8', results: '$9', errors: '$10', at: '$6::bigint' }, 'AND EXISTS (SELECT 1 FROM engine)')}
  ), ${workCtes('$1', '$6::bigint', 'due', 'AND id <> ALL($8::bigint[]) AND EXISTS (SELECT 1 FROM engine)')},
  calls AS (
    SELECT * FROM call_intents WHERE engine_id = $1 AND status = ANY($11)
    UNION ALL (SELECT * FROM call_intents WHERE engine_id = $1 ORDER BY created_at DESC LIMIT 1)
  )
  SELECT (SELECT ${engineJson('engine')} FROM engine) AS engine, (SELECT version FROM bumped) AS version,
    (SELECT coalesce(json_agg(acked), '[]') FROM acked) AS acked, ${WORK_COLUMNS},
    (SELECT coalesce(json_agg(${callJson('calls')}), '[]') FROM calls) AS calls`;

/**
 * Reconciles the engine's live calls with the one the report says it holds, flagging or clearing
 * `orphaned`, and returns the call the window is told about: its live call, else its latest, so
 * it also learns how a call ended. The report read both; a flag that changes is written here.
 */
async function reconcileCalls(db: Db, changes: Changes, rows: CallRow[], heldCallId: string | null, at: number): Promise<CallRow | null> {
  const isLive = (call: CallRow) => (LIVE_STATUSES as readonly string[]).includes(call.status);
  const live = rows.filter((call, index) => isLive(call) && rows.findIndex((other) => other.id === call.id) === index);
  const flips = live.filter((call) => {
    const since = call.claimed_at ?? call.created_at;
    const orphaned = heldCallId !== call.id && at - since > LIMITS.orphanGraceSeconds * 1000;
    if (orphaned === call.orphaned) return false;
    call.orphaned = orphaned;
    return true;
  });
  if (flips.length > 0) {
    await db.tx(async (sql) => {
      for (const call of flips) {
        await sql.query('UPDATE call_intents SET orphaned = $2 WHERE id = $1', [call.id, call.orphaned]);
        await changes.touchAgent(sql, call.integration_id, call.member_id);
      }
    });
  }
  const newestLive = live.sort((a, b) => b.created_at - a.created_at)[0];
  return newestLive ?? rows.at(-1) ?? null;
}

export async function engineHeartbeat(deps: { db: Db; clock: Clock; commands: Commands }, context: EngineContext, report: HeartbeatRequest): Promise<HeartbeatResult> {
  const changes = new Changes();
  const at = deps.clock.now();
  const state = report.state === 'ready' && report.mic_ready ? 'ready' : 'enabling';
  const [row] = await deps.db.query<ReportRow>(REPORT, [
    context.engine.id,
    state,
    report.mic_ready,
    report.busy,
    report.muted,
    at,
    ...ackParams([{ engineId: context.engine.id, acks: report.acks }]),
    LIVE_STATUSES,
  ]);
  const { engine, version, acked, calls } = row!;
  if (!engine) return { engine: context.engine, commands: [], dialRequests: [], call: null, firstAcks: [], changes };
  if (version !== null) changes.agentTouched(engine.integration_id, engine.member_id, version);
  const call = await reconcileCalls(deps.db, changes, calls, report.call_id, at);
  const work = toWork(row!, at, () => deps.commands.onRedelivery?.());
  return { engine, commands: work.commands, dialRequests: work.dial_requests, call, firstAcks: firstAcks(acked), changes };
}
