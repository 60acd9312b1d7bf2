/**
 * Claiming an intent (spec section 3, "queued → claimed"): one atomic conditional update, so of
 * any number of concurrent claimants exactly one wins and every other gets 404.
 */
import { C2CError } from '../../../shared/errors.js';
import type { Clock } from '../../clock.js';
import type { ProviderName } from '../../providers/index.js';
import type { Db } from '../../store/index.js';
import { Changes } from '../changes.js';
import type { EngineContext } from '../engines/auth.js';
import type { CallRow } from '../views.js';

export async function claimIntent(db: Db, clock: Clock, context: EngineContext, requestId: string, provider: ProviderName): Promise<{ call: CallRow; changes: Changes }> {
  const changes = new Changes();
  const { engine } = context;
  const call = await db.tx(async (sql) => {
    const now = clock.now();
    const [claimed] = await sql.query<CallRow>(
      `UPDATE call_intents SET status = 'claimed', engine_id = $2, claimed_at = $3, provider = $6
       WHERE id = $1 AND integration_id = $4 AND member_id = $5 AND status = 'queued' AND expires_at > $3
       RETURNING *`,
      [requestId, engine.id, now, engine.integration_id, engine.member_id, provider],
    );
    if (!claimed) throw new C2CError('not_found', 'No queued call with this request_id for this agent (claimed elsewhere, expired or unknown).');
    await changes.touchAgent(sql, claimed.integration_id, claimed.member_id);
    return claimed;
  });
  return { call, changes };
}
