/**
 * Revoking an integration (spec section 1): its keys stop, and every widget session ends at once.
 * Each ended session is announced on the bus so gateways disconnect its sockets.
 */
import type { Sql } from '../../store/index.js';
import { OperatorError, type OperatorDeps } from './accounts.js';

export interface RevocationResult {
  sessions: number;
}

export async function revokeIntegration(deps: OperatorDeps, integrationId: string): Promise<RevocationResult> {
  const now = deps.clock.now();
  const result = await deps.db.tx(async (sql: Sql) => {
    const updated = await sql.query(
      `UPDATE integrations SET status = 'revoked', revoked_at = $2 WHERE id = $1 RETURNING id`,
      [integrationId, now],
    );
    if (updated.length === 0) throw new OperatorError(`No integration ${integrationId}.`);
    await sql.query('UPDATE server_keys SET revoked_at = $2 WHERE integration_id = $1 AND revoked_at IS NULL', [integrationId, now]);
    const sessions = await sql.query<{ id: string }>(
      `UPDATE widget_sessions SET revoked_at = $2, end_reason = 'integration_revoked'
       WHERE integration_id = $1 AND revoked_at IS NULL RETURNING id`,
      [integrationId, now],
    );
    return { sessionIds: sessions.map((s) => s.id) };
  });
  deps.bus.publish({ type: 'integration', integrationId });
  for (const sessionId of result.sessionIds) deps.bus.publish({ type: 'session', sessionId, reason: 'integration_revoked' });
  return { sessions: result.sessionIds.length };
}
