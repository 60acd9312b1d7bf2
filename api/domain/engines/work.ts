/**
 * What an engine is handed: its commands and its agent's queued dial requests. The snapshot a
 * (re)connecting engine gets carries every command not acked yet, and so does a heartbeat once an
 * ack is overdue, so a push lost with its socket is healed by either. A push carries only what was
 * never handed over: a command already pushed is waiting for its ack, and handing it over again
 * with every later push would, under load, multiply the deliveries and acks of a busy engine's
 * backlog with each new command.
 *
 * The hand-over is SQL fragments (CTEs and select columns) rather than statements of its own, so
 * a heartbeat or a command hands work over inside its own statement: one round trip to the store
 * instead of three on the paths every call window and every command take.
 */
import type { EngineWork } from '../../../shared/events.js';
import type { EngineCommand } from '../../../shared/schemas/engine-api.js';
import { LIMITS } from '../../../shared/limits.js';
import type { Sql } from '../../store/index.js';
import { callJson, toCall, type CallRow } from '../views.js';

/** A command as handed over (a row of the `handed` CTE). */
export interface HandedCommand {
  id: number;
  kind: EngineCommand['kind'];
  call_id: string | null;
  digits: string | null;
  available: boolean | null;
  deliveries: number;
}

/** What the work columns return: JSON arrays, parsed by both drivers. */
export interface WorkColumns {
  handed: HandedCommand[];
  dial: CallRow[];
}

/** Work columns of a hand-over to several engines: each row names the engine it went to. */
export interface EnginesWorkColumns {
  handed: Array<HandedCommand & { engine_id: string }>;
  dial: Array<CallRow & { handed_to: string }>;
}

const HANDED_COLUMNS = 'id, engine_id, kind, call_id, digits, available, deliveries';

/**
 * Which commands a hand-over carries: every one not acked (`unacked`: the snapshot of a socket that
 * just connected), those not acked in time (`due`: a heartbeat over the socket, which does not
 * repeat a command whose ack may still be on the way), or only new ones (`new`: a push).
 */
export type HandOver = 'unacked' | 'due' | 'new';

/** `allUnackedOf` (SQL for engine ids): engines whose every unacked command a `due` hand-over carries. */
const handedWhere = (handOver: HandOver, at: string, allUnackedOf?: string): string =>
  ({
    unacked: `status IN ('queued', 'delivered')`,
    due: `(status = 'queued' OR (status = 'delivered' AND (delivered_at <= ${at} - ${LIMITS.redeliverAfterMs}${allUnackedOf ? ` OR engine_id IN (${allUnackedOf})` : ''})))`,
    new: `status = 'queued'`,
  })[handOver];

/**
 * CTEs `handed` (the engines' commands of the hand-over, each counted as handed over once more)
 * and `dial` (their agents' queued calls, `handed_to` naming the engine), for the engines and time
 * named by the SQL given: `engines` goes inside `IN (…)`, a parameter or a subquery. `extra`
 * narrows `handed` (a statement that also acks commands leaves those out); `allUnackedOf` widens a
 * `due` hand-over to every unacked command of those engines (handedWhere).
 */
export function workCtes(engines: string, at: string, handOver: HandOver, extra = '', allUnackedOf?: string): string {
  return `handed AS (
    UPDATE widget_commands SET status = CASE WHEN status = 'queued' THEN 'delivered' ELSE status END,
      deliveries = deliveries + 1, delivered_at = coalesce(delivered_at, ${at})
    WHERE engine_id IN (${engines}) AND ${handedWhere(handOver, at, allUnackedOf)} AND refused IS NULL ${extra}
    RETURNING ${HANDED_COLUMNS}
  ), dial AS (
    SELECT c.*, e.id AS handed_to FROM call_intents c JOIN engines e ON e.integration_id = c.integration_id AND e.member_id = c.member_id
    WHERE e.id IN (${engines}) AND c.status = 'queued' AND c.ended_at IS NULL AND c.expires_at > ${at}
  )`;
}

/** Splits a hand-over to several engines by engine. */
export function workByEngine(columns: EnginesWorkColumns): Map<string, WorkColumns> {
  const byEngine = new Map<string, WorkColumns>();
  const of = (engineId: string) => byEngine.get(engineId) ?? byEngine.set(engineId, { handed: [], dial: [] }).get(engineId)!;
  for (const command of columns.handed) of(command.engine_id).handed.push(command);
  for (const call of columns.dial) of(call.handed_to).dial.push(call);
  return byEngine;
}

/** Select columns returning the `handed` and `dial` CTEs (WorkColumns). */
export const WORK_COLUMNS = `(SELECT coalesce(json_agg(h ORDER BY h.id), '[]') FROM handed h) AS handed,
  (SELECT coalesce(json_agg(${callJson('d')} ORDER BY d.created_at), '[]') FROM dial d) AS dial`;

/** Renders the work; `onRedelivery` counts each command handed over again (no ack came for an earlier one). */
export function toWork(columns: WorkColumns, now: number, onRedelivery?: () => void): EngineWork {
  const commands = [...columns.handed].sort((a, b) => Number(a.id) - Number(b.id));
  for (const command of commands) if (command.deliveries > 1) onRedelivery?.();
  return {
    commands: commands.map((row) => ({
      command_id: Number(row.id),
      kind: row.kind,
      call_id: row.call_id,
      digits: row.digits,
      available: row.available,
      ref: row.call_id,
    })),
    dial_requests: columns.dial.map((call) => {
      const view = toCall(call, now);
      return { request_id: call.id, display: view.display, expires_at: view.expires_at };
    }),
  };
}

/** Hands engines their work now, in one statement; an engine named twice gets the same work. */
export async function handOverWork(sql: Sql, engineIds: string[], now: number, handOver: HandOver, onRedelivery?: () => void): Promise<EngineWork[]> {
  // One engine as a plain parameter, so the prepared statement keeps a generic plan (store/batch-rows.ts).
  const one = engineIds.length === 1;
  const [row] = await sql.query<EnginesWorkColumns>(`WITH ${workCtes(one ? '$1::text' : 'SELECT unnest($1::text[])', '$2::bigint', handOver)} SELECT ${WORK_COLUMNS}`, [
    one ? engineIds[0] : engineIds,
    now,
  ]);
  const work = workByEngine(row!);
  const rendered = new Map([...work].map(([engineId, columns]) => [engineId, toWork(columns, now, onRedelivery)]));
  return engineIds.map((engineId) => rendered.get(engineId) ?? { commands: [], dial_requests: [] });
}
