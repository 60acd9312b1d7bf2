/**
 * Offline sooner than 90 s, from socket drops (the fallback rule: offline detection "may
 * use socket disconnects to act sooner than 90 s, with a short grace", and "must never end a call
 * on a single drop"). A live window heartbeats over REST every heartbeat_fallback_ms while its
 * socket is down, at once when a socket is back, and every heartbeat_ms on a socket; one that has
 * said nothing for LIMITS.engineDropGraceSeconds since its socket dropped is gone (closed without a
 * goodbye, crashed, cut off), so it is marked offline: new calls get `agent_offline` and its widgets
 * show it now rather than after 90 s. An engine with a call is left to the 90 s rules, so a blip
 * never costs a call, and its next heartbeat brings any engine back.
 */
import type { Db } from '../../store/index.js';
import { agentVersionBump } from '../agent-state.js';
import { Changes } from '../changes.js';
import { ON_ENGINE_STATUS_LIST } from '../calls/checks.js';

export interface Drop {
  engineId: string;
  /** when its socket dropped (ms) */
  at: number;
}

/**
 * Rows are locked in id order, as heartbeat batches lock them, so the two never deadlock; a
 * heartbeat that commits while this waits for a row is seen (the row's conditions are checked again
 * once it is locked).
 */
const MARK_OFFLINE = `WITH dropped AS (
    SELECT e.id FROM engines e JOIN unnest($1::text[], $2::bigint[]) AS d(id, dropped_at) ON d.id = e.id
    WHERE e.state IN ('enabling', 'ready') AND e.last_seen_at <= d.dropped_at
      AND NOT EXISTS (SELECT 1 FROM call_intents c WHERE c.engine_id = e.id AND c.status IN (${ON_ENGINE_STATUS_LIST}))
    ORDER BY e.id FOR NO KEY UPDATE OF e
  ), offline AS (
    UPDATE engines e SET state = 'offline', version = e.version + 1 FROM dropped WHERE e.id = dropped.id
    RETURNING e.integration_id, e.member_id
  )
  ${agentVersionBump('SELECT DISTINCT integration_id, member_id FROM offline')}`;

/** Marks offline the engines of these drops not heard from since, and holding no call; one statement for them all. */
export async function markDroppedOffline(db: Db, drops: Drop[]): Promise<Changes> {
  const bumped = await db.query<{ integration_id: string; member_id: string; version: number }>(MARK_OFFLINE, [
    drops.map((drop) => drop.engineId),
    drops.map((drop) => drop.at),
  ]);
  const changes = new Changes();
  for (const row of bumped) changes.agentTouched(row.integration_id, row.member_id, row.version);
  return changes;
}
