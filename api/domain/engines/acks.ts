/**
 * Command acks from the engine (in a heartbeat, or the socket's `ack` event): each records the
 * window's result once. A command is done or failed by its first ack; later acks of the same
 * command (a redelivery acked again) only count, so the audit shows them.
 */
import type { EngineCommand, HeartbeatRequest } from '../../../shared/schemas/engine-api.js';
import { batchRows } from '../../store/batch-rows.js';
import type { Sql } from '../../store/index.js';
import { WINDOW_CLOSED } from './closed-commands.js';

/** A command the engine acked for the first time (device effects follow for simulated engines, if it was done). */
export interface FirstAck {
  command_id: number;
  /** the widget's request_id for it */
  request_id: string;
  kind: EngineCommand['kind'];
  call_id: string | null;
  digits: string | null;
  /** the window carried it out (else it reported it failed, saying why in `error`) */
  done: boolean;
  error: string | null;
}

/** A row of the ack UPDATE. */
export interface AckedRow extends Omit<FirstAck, 'done'> {
  acks: number;
  status: string;
}

type Acks = HeartbeatRequest['acks'];

/** One engine's acks. */
export interface EngineAcks {
  engineId: string;
  acks: Acks;
}

/**
 * Acks as four array parameters (engine ids, command ids, results, errors). An engine's command
 * acked twice in the same statement is applied once, for the first report that named it. Acks
 * from other engines are kept apart: they match no row (a command belongs to one engine), and
 * must not shadow its own engine's ack.
 */
export function ackParams(reports: EngineAcks[]): [string[], number[], string[], (string | null)[]] {
  const seen = new Set<string>();
  const first = (engineId: string, commandId: number) => !seen.has(`${engineId}:${commandId}`) && Boolean(seen.add(`${engineId}:${commandId}`));
  const rows = reports.flatMap(({ engineId, acks }) => acks.filter((ack) => first(engineId, ack.command_id)).map((ack) => ({ engineId, ...ack })));
  return [rows.map((r) => r.engineId), rows.map((r) => r.command_id), rows.map((r) => r.result), rows.map((r) => r.error ?? null)];
}

/**
 * An UPDATE applying acks to the commands of the engines they name. `from` is a FROM item `a` with
 * the columns engine_id, id, result and error (the four ackParams arrays, or their batchRows);
 * `extra` narrows it (a heartbeat acks only for an engine still open).
 */
export function ackUpdate(from: string, at: string, extra = ''): string {
  return `UPDATE widget_commands c SET acks = c.acks + 1,
      status = CASE WHEN c.status IN ('queued', 'delivered') THEN a.result ELSE c.status END,
      error = CASE WHEN c.status IN ('queued', 'delivered') THEN a.error ELSE c.error END,
      done_at = coalesce(c.done_at, ${at})
    FROM ${from}
    WHERE c.id = a.id AND c.engine_id = a.engine_id ${extra}
    RETURNING c.engine_id, c.id AS command_id, c.request_id, c.kind, c.call_id, c.digits, c.acks, c.status, c.error`;
}

/**
 * The commands these acks acked for the first time. Not one the service failed as its window
 * closed (closed-commands.ts), whose ack came after: the window's result comes too late to
 * count, and is not to be shown as a failure (a focus the window did carry out, say).
 */
export function firstAcks(rows: AckedRow[]): FirstAck[] {
  return rows
    .filter((row) => row.acks === 1 && !(row.status === 'failed' && row.error === WINDOW_CLOSED))
    .map((row) => ({
      command_id: Number(row.command_id),
      request_id: row.request_id,
      kind: row.kind,
      call_id: row.call_id,
      digits: row.digits,
      done: row.status === 'done',
      error: row.error,
    }));
}

/**
 * Applies the acks of many engines in one statement (the socket's `ack` events of a busy node
 * go together: see store/coalesce.ts); each report gets the first acks among its own.
 */
export async function applyAcks(sql: Sql, reports: EngineAcks[], at: number): Promise<FirstAck[][]> {
  const [engines, ids, results, errors] = ackParams(reports);
  const input = batchRows('a', [
    ['engine_id', 'text', engines],
    ['id', 'bigint', ids],
    ['result', 'text', results],
    ['error', 'text', errors],
  ]);
  const rows = ids.length === 0 ? [] : await sql.query<AckedRow & { engine_id: string }>(ackUpdate(input.from, '$5::bigint'), [...input.params, at]);
  const claimed = new Set<number>();
  return reports.map(({ engineId, acks }) => {
    const ids = new Set(acks.map((ack) => ack.command_id));
    const own = rows.filter((row) => row.engine_id === engineId && ids.has(Number(row.command_id)) && !claimed.has(Number(row.command_id)));
    for (const row of own) claimed.add(Number(row.command_id));
    return firstAcks(own);
  });
}
