/**
 * The voice webhook's domain half (spec section 3, "claimed → dialing"): consume the claimed
 * intent exactly once and plan the dial: the real number (from the store, never the browser), the
 * frozen caller ID, and the time limit from the caps and the wallet's share.
 */
import { engineIdentity } from '../../../shared/prefixes.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../store/index.js';
import { Changes } from '../changes.js';
import type { CallRow } from '../views.js';
import { finishCall } from './lifecycle.js';
import { lockWallet, minimumSeconds, planDial } from './wallet.js';

export interface DialWebhook {
  callSid: string;
  from: string;
  /** the intent id (the engine connects with To = request_id) */
  to: string;
  biz: string;
  callerId: string;
}

export type DialDecision = { dial: { number: string; callerId: string; timeLimitSeconds: number; intentId: string } } | { reject: string };

export async function consumeForDial(db: Db, clock: Clock, webhook: DialWebhook): Promise<{ decision: DialDecision; changes: Changes }> {
  const changes = new Changes();
  const decision = await db.tx(async (sql): Promise<DialDecision> => {
    const [call] = await sql.query<CallRow>('SELECT * FROM call_intents WHERE id = $1 AND account_id = $2 FOR UPDATE', [webhook.to, webhook.biz]);
    if (!call || call.direction !== 'outbound') return { reject: 'unknown intent' };
    // an outbound call always has its number (POST /calls checked it); only incoming ones may not
    const plan = (limit: number) => ({ dial: { number: call.phone_number!, callerId: call.caller_id!, timeLimitSeconds: limit, intentId: call.id } });
    // Without a CallSid a request cannot be told apart from a retry (nor the call hung up later).
    // The route refuses such a webhook (422) before this; kept here for any other caller.
    if (!webhook.callSid) return { reject: 'no CallSid' };
    // The provider retrying the same webhook gets the same answer; anything else is a second use. A
    // retry only makes sense while the first answer may not have reached it (still dialing): once
    // the call rang, connected or ended, answering <Dial> again would dial the number again, unbilled.
    if (call.provider_call_sid === webhook.callSid && call.time_limit_seconds !== null) {
      return call.status === 'dialing' ? plan(call.time_limit_seconds) : { reject: `intent is ${call.status}` };
    }
    if (call.status !== 'claimed' || call.engine_id === null) return { reject: `intent is ${call.status}` };
    if (webhook.from !== `client:${engineIdentity(call.engine_id)}`) return { reject: 'not the claiming engine' };
    if (webhook.callerId !== call.caller_id) return { reject: 'caller id differs from the intent' };

    // Disabled or suspended between the claim and the dial: no new call leaves on its account (the
    // window's own requests are refused from then on; this webhook comes from the provider).
    const [usable] = await sql.query<{ ok: boolean }>(
      `SELECT i.status = 'active' AND a.status = 'active' AS ok FROM integrations i JOIN accounts a ON a.id = i.account_id WHERE i.id = $1`,
      [call.integration_id],
    );
    if (!usable?.ok) {
      await finishCall(sql, changes, clock.now(), call.id, { status: 'failed', reason: 'integration_disabled', error: 'integration_disabled' });
      return { reject: 'integration disabled or account suspended' };
    }
    await lockWallet(sql, call.account_id);
    const limit = await planDial(sql, call.account_id, call.id, call.per_minute_micros, call.policy.max_call_seconds);
    const now = clock.now();
    // As POST /calls asked: enough for the minimum a call is placed for. The wallet may have less
    // for it now (spent elsewhere meanwhile): one left less is not put through to be cut off a few
    // seconds in.
    if (limit < minimumSeconds(call.policy.max_call_seconds)) {
      // Said now, not by the connect timeout a minute later: the agent and the backend learn why.
      await finishCall(sql, changes, now, call.id, { status: 'failed', reason: 'insufficient_balance', error: 'insufficient_balance' });
      return { reject: 'no balance' };
    }
    const [updated] = await sql.query<CallRow>(
      `UPDATE call_intents SET status = 'dialing', dialing_at = $2, provider_call_sid = $3, time_limit_seconds = $4
       WHERE id = $1 AND status = 'claimed' RETURNING *`,
      [call.id, now, webhook.callSid, limit],
    );
    if (!updated) return { reject: 'intent already consumed' };
    await changes.touchAgent(sql, call.integration_id, call.member_id);
    return plan(limit);
  });
  return { decision, changes };
}

