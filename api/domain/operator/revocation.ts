/**
 * Revoking an integration (spec section 1): its keys stop, every widget session and call window
 * ends at once, and calls in progress end through the provider. Each ended session and window is
 * announced on the bus so gateways disconnect their sockets.
 */
import type { Providers } from '../../providers/index.js';
import { Changes } from '../changes.js';
import { LIVE_STATUS_LIST, ON_ENGINE_STATUS_LIST } from '../calls/checks.js';
import { hangupCall } from '../calls/hangup.js';
import type { Sql } from '../../store/index.js';
import { OperatorError, type OperatorDeps } from './accounts.js';
import { failCommandsOfClosedWindows } from '../engines/closed-commands.js';

export interface RevocationResult {
  sessions: number;
  engines: number;
  calls: number;
  /** calls the provider could not be reached to end; the reaper retries them */
  uncertain: number;
}

/**
 * Closes the integration's call windows that are not closed, and records them in `changes`.
 * Rows locked in id order, as heartbeat batches lock them (heartbeat.ts): in the table's order, a
 * step holding one window's row while waiting for another's that a batch holds, itself waiting for
 * the first, would deadlock, and PostgreSQL would end one of the two.
 */
async function closeEngines(sql: Sql, integrationId: string, now: number, reason: string, changes: Changes): Promise<Array<{ id: string; member_id: string }>> {
  const engines = await sql.query<{ id: string; member_id: string }>(
    `WITH live AS (
       SELECT id FROM engines WHERE integration_id = $1 AND state <> 'closed' ORDER BY id FOR NO KEY UPDATE
     ) UPDATE engines e SET state = 'closed', closed_at = $2, close_reason = $3, version = e.version + 1
     FROM live WHERE e.id = live.id RETURNING e.id, e.member_id`,
    [integrationId, now, reason],
  );
  await failCommandsOfClosedWindows(sql, changes, now, engines.map((engine) => engine.id));
  for (const engine of engines) {
    changes.engineClosed(engine.id, reason);
    await changes.touchAgent(sql, integrationId, engine.member_id);
  }
  return engines;
}

/**
 * Closes every call window of an integration; its agents open theirs again from the widget. The
 * operator's answer to a leaked server key: after a rotation what the key made ends within the
 * hour and a token's life, but a window paired through one of its sessions lives as long as it
 * heartbeats (a window's credential is its own: the spec keeps it past the widget's logout). Calls
 * on those windows are orphaned, as when a window closes: told it is closed, the window lets its
 * voice leg go, which ends the call; one that stays up is the reaper's, or Hang up in the widget's.
 */
export async function closeIntegrationWindows(deps: OperatorDeps, integrationId: string): Promise<number> {
  const changes = new Changes();
  const closed = await deps.db.tx(async (sql) => {
    const [integration] = await sql.query('SELECT 1 FROM integrations WHERE id = $1', [integrationId]);
    if (!integration) throw new OperatorError(`No integration ${integrationId}.`);
    const engines = await closeEngines(sql, integrationId, deps.clock.now(), 'closed_by_operator', changes);
    if (engines.length > 0) {
      await sql.query(`UPDATE call_intents SET orphaned = true, orphaned_at = coalesce(orphaned_at, $2) WHERE engine_id = ANY($1::text[]) AND status IN (${ON_ENGINE_STATUS_LIST})`, [
        engines.map((e) => e.id),
        deps.clock.now(),
      ]);
    }
    return engines.length;
  });
  changes.publish(deps.bus);
  return closed;
}

export async function revokeIntegration(deps: OperatorDeps & { providers: Providers }, integrationId: string): Promise<RevocationResult> {
  const now = deps.clock.now();
  const changes = new Changes();
  const revoked = await deps.db.tx(async (sql) => {
    const updated = await sql.query(`UPDATE integrations SET status = 'revoked', revoked_at = $2 WHERE id = $1 RETURNING id`, [integrationId, now]);
    if (updated.length === 0) throw new OperatorError(`No integration ${integrationId}.`);
    await sql.query('UPDATE server_keys SET revoked_at = $2 WHERE integration_id = $1 AND revoked_at IS NULL', [integrationId, now]);
    // The tokens still alive: an expired one is refused anyway and has no socket to end. Reads
    // every token of the integration kept (dead ones go a day after expiry: retention.ts).
    const sessions = await sql.query<{ id: string }>(
      `/* scans by design: every token of one integration, once */
       UPDATE widget_sessions SET revoked_at = $2, end_reason = 'integration_revoked'
       WHERE integration_id = $1 AND revoked_at IS NULL AND expires_at > $2 RETURNING id`,
      [integrationId, now],
    );
    for (const { id } of sessions) changes.sessionEnded(id, 'integration_revoked');
    const engines = await closeEngines(sql, integrationId, now, 'integration_revoked', changes);
    // Its numbers are free for the integration that replaces it (a revoked one can no longer be changed).
    await sql.query('DELETE FROM incoming_numbers WHERE integration_id = $1', [integrationId]);
    const calls = await sql.query<{ id: string }>(`SELECT id FROM call_intents WHERE integration_id = $1 AND status IN (${LIVE_STATUS_LIST})`, [integrationId]);
    return { sessions: sessions.length, engines: engines.length, callIds: calls.map((c) => c.id) };
  });
  // The sessions and windows ended first, then the integration's change: a socket is then ended
  // for the reason named (integration_revoked), not by the gateway's re-check of its credential
  // (which says only that it was closed), and before the calls' hangups, one provider request each.
  changes.publish(deps.bus);
  deps.bus.publish({ type: 'integration', integrationId });
  const hungUp = new Changes();
  let uncertain = 0;
  for (const callId of revoked.callIds) {
    try {
      hungUp.merge((await hangupCall(deps, callId, 'integration_revoked')).changes);
    } catch {
      uncertain += 1;
    }
  }
  hungUp.publish(deps.bus);
  return { sessions: revoked.sessions, engines: revoked.engines, calls: revoked.callIds.length, uncertain };
}
