/**
 * Command acks from the engine (in a heartbeat, or the socket's `ack` event): each records the
 * window's result once. A command is done or failed by its first ack; later acks of the same
 * command (a redelivery acked again) only count, so the audit shows them.
 */
import type { EngineCommand, HeartbeatRequest } from '../../../shared/schemas/engine-api.js';
import type { Sql } from '../../store/index.js';

/** A command the engine acked as done for the first time (device effects follow for simulated engines). */
export interface FirstAck {
  command_id: number;
  kind: EngineCommand['kind'];
  call_id: string | null;
  digits: string | null;
}

/** A row of the ack UPDATE. */
export interface AckedRow extends FirstAck {
  acks: number;
  status: string;
}

type Acks = HeartbeatRequest['acks'];

/** The acks as three array parameters (ids, results, errors); an id acked twice in one report counts once. */
export function ackParams(acks: Acks): [number[], string[], (string | null)[]] {
  const seen = new Set<number>();
  const unique = acks.filter((ack) => !seen.has(ack.command_id) && seen.add(ack.command_id));
  return [unique.map((a) => a.command_id), unique.map((a) => a.result), unique.map((a) => a.error ?? null)];
}

/**
 * An UPDATE applying the acks given as array parameters to the engine's commands, for the SQL
 * expressions named; `extra` narrows it (a heartbeat acks only for an engine still open).
 */
export function ackUpdate(p: { engine: string; at: string; ids: string; results: string; errors: string }, extra = ''): string {
  return `UPDATE widget_commands c SET acks = c.acks + 1,
      status = CASE WHEN c.status IN ('queued', 'delivered') THEN a.result ELSE c.status END,
      error = CASE WHEN c.status IN ('queued', 'delivered') THEN a.error ELSE c.error END,
      done_at = coalesce(c.done_at, ${p.at})
    FROM unnest(${p.ids}::bigint[], ${p.results}::text[], ${p.errors}::text[]) AS a(id, result, error)
    WHERE c.id = a.id AND c.engine_id = ${p.engine} ${extra}
    RETURNING c.id AS command_id, c.kind, c.call_id, c.digits, c.acks, c.status`;
}

/** The commands done by these acks for the first time. */
export function firstAcks(rows: AckedRow[]): FirstAck[] {
  return rows
    .filter((row) => row.acks === 1 && row.status === 'done')
    .map((row) => ({ command_id: Number(row.command_id), kind: row.kind, call_id: row.call_id, digits: row.digits }));
}

/** Applies acks on their own, in one statement. */
export async function applyAcks(sql: Sql, engineId: string, acks: Acks, at: number): Promise<FirstAck[]> {
  if (acks.length === 0) return [];
  const rows = await sql.query<AckedRow>(ackUpdate({ engine: '$1', at: '$2::bigint', ids: '$3', results: '$4', errors: '$5' }), [engineId, at, ...ackParams(acks)]);
  return firstAcks(rows);
}
