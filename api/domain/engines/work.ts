/**
 * What an engine is handed: its unacked commands and its agent's queued dial requests. The same
 * set answers a heartbeat, is pushed as `work`, and is the snapshot a reconnecting engine gets, so
 * a push that was lost is healed by the next one or by the heartbeat.
 */
import type { EngineWork } from '../../../shared/events.js';
import type { Sql } from '../../store/index.js';
import type { Commands } from '../commands/service.js';
import { toCall, type CallRow } from '../views.js';

export async function handOverWork(sql: Sql, commands: Pick<Commands, 'pendingFor'>, engineId: string, now: number): Promise<EngineWork> {
  const pending = await commands.pendingFor(sql, engineId);
  const queued = await sql.query<CallRow>(
    `SELECT c.* FROM call_intents c JOIN engines e ON e.integration_id = c.integration_id AND e.member_id = c.member_id
     WHERE e.id = $1 AND c.status = 'queued' AND c.expires_at > $2 ORDER BY c.created_at`,
    [engineId, now],
  );
  const dialRequests = queued.map((call) => {
    const view = toCall(call, now);
    return { request_id: call.id, display: view.display, expires_at: view.expires_at };
  });
  return { commands: pending, dial_requests: dialRequests };
}
