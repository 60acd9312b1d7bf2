/**
 * Offline sooner than 90 s, from socket drops (the fallback rule: offline detection "may
 * use socket disconnects to act sooner than 90 s, with a short grace", and "must never end a call
 * on a single drop"). A live window heartbeats over REST within heartbeat_fallback_ms of losing its
 * socket, and at once when a socket is back; one that has said nothing for
 * LIMITS.engineDropGraceSeconds since its socket dropped is gone (closed without a goodbye,
 * crashed, cut off), so it is marked offline: new calls get `agent_offline` and its widgets show
 * it now rather than after 90 s. An engine with a call is left to the 90 s rules, so a blip never
 * costs a call, and its next heartbeat brings any engine back.
 */
import type { Db } from '../../store/index.js';
import { Changes } from '../changes.js';
import { LIVE_STATUSES } from '../calls/checks.js';

export interface Drop {
  engineId: string;
  /** when its socket dropped (ms) */
  at: number;
}

/** Marks offline the engines of these drops not heard from since, and holding no call; one statement for them all. */
export async function markDroppedOffline(db: Db, drops: Drop[]): Promise<Changes> {
  const changes = new Changes();
  await db.tx(async (sql) => {
    const offline = await sql.query<{ integration_id: string; member_id: string }>(
      `UPDATE engines e SET state = 'offline', version = e.version + 1
       FROM unnest($1::text[], $2::bigint[]) AS d(id, dropped_at)
       WHERE e.id = d.id AND e.state IN ('enabling', 'ready') AND e.last_seen_at <= d.dropped_at
         AND NOT EXISTS (SELECT 1 FROM call_intents c WHERE c.engine_id = e.id AND c.status = ANY($3))
       RETURNING e.integration_id, e.member_id`,
      [drops.map((drop) => drop.engineId), drops.map((drop) => drop.at), LIVE_STATUSES],
    );
    for (const row of offline) await changes.touchAgent(sql, row.integration_id, row.member_id);
  });
  return changes;
}
