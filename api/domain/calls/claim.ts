/**
 * Claiming an intent (spec section 3, "queued → claimed"): one atomic conditional update, so of
 * any number of concurrent claimants exactly one engine wins and every other gets 404.
 *
 * The winner may ask again (decided; the spec is silent): a window whose claim answer was lost (a
 * timeout, a dropped connection) cannot tell whether it won, and the request is no longer offered
 * to it once claimed. So while the intent is still claimed by the same engine and its voice leg has
 * not started, a claim answers the same claim again (claimed_at unchanged, so the reaper's connect
 * timeout still counts from the first). Once the leg started it is 404 like any other: a second
 * connect would place a second leg.
 *
 * Only an open window claims: its row is read FOR SHARE first, which waits for a pairing closing it
 * (engines/pair.ts locks the window it replaces before it checks that window's calls), and a pairing
 * that comes later waits for this claim, and then finds the window on a call (agent_busy). Without
 * it, a window being replaced could claim a call that the new window never sees, and drop it when
 * it learns it was closed. The token's cached check may be up to a minute old; the row is not.
 */
import { C2CError } from '../../../shared/errors.js';
import type { Clock } from '../../clock.js';
import type { ProviderName } from '../../providers/index.js';
import type { Db } from '../../store/index.js';
import { Changes } from '../changes.js';
import { CLOSED_WINDOW_MESSAGE, type EngineContext } from '../engines/auth.js';
import type { CallRow } from '../views.js';

export interface ClaimResult {
  call: CallRow;
  changes: Changes;
  /** false when the engine had already claimed it (a repeated claim): nothing changed */
  fresh: boolean;
}

export async function claimIntent(db: Db, clock: Clock, context: EngineContext, requestId: string, provider: ProviderName): Promise<ClaimResult> {
  const changes = new Changes();
  const { engine } = context;
  return db.tx(async (sql) => {
    const [open] = await sql.query(`SELECT 1 FROM engines WHERE id = $1 AND state <> 'closed' FOR SHARE`, [engine.id]);
    if (!open) throw new C2CError('unauthorized', CLOSED_WINDOW_MESSAGE);
    const now = clock.now();
    const [claimed] = await sql.query<CallRow>(
      `UPDATE call_intents SET status = 'claimed', engine_id = $2, claimed_at = $3, provider = $6
       WHERE id = $1 AND integration_id = $4 AND member_id = $5 AND status = 'queued' AND expires_at > $3
       RETURNING *`,
      [requestId, engine.id, now, engine.integration_id, engine.member_id, provider],
    );
    if (claimed) {
      await changes.touchAgent(sql, claimed.integration_id, claimed.member_id);
      return { call: claimed, changes, fresh: true };
    }
    const [again] = await sql.query<CallRow>(
      `SELECT * FROM call_intents
       WHERE id = $1 AND integration_id = $3 AND member_id = $4 AND engine_id = $2 AND status = 'claimed' AND provider_call_sid IS NULL`,
      [requestId, engine.id, engine.integration_id, engine.member_id],
    );
    if (!again) throw new C2CError('not_found', 'No queued call with this request_id for this agent (claimed elsewhere, expired or unknown).');
    return { call: again, changes, fresh: false };
  });
}
