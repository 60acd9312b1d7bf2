/**
 * A call whose final status callback never came, settled from the provider's own record of it.
 * Twilio does not retry a callback this service answered with an error (a store blip answers
 * 503), so such a call would stay live in the store: its agent busy with it, and the call billed
 * up to its time limit. The reaper asks the provider about a call its window no longer holds, and
 * about one overdue, before it ends it itself (reaper.ts). A final record is applied as the final
 * callback it stands for (provider-events.ts): the same rules, with the provider's end time and
 * talk time. A record of a leg still running changes nothing: the moment of its answer, which a
 * `connected` would need, is not on it.
 */
import type { Clock } from '../../clock.js';
import { FINAL_CALL_STATUSES, type ProviderCallRecord } from '../../providers/provider.js';
import { loadProviderAccount, type Providers } from '../../providers/index.js';
import type { Db } from '../../store/index.js';
import { Changes } from '../changes.js';
import type { CallRow } from '../views.js';
import { applyProviderEvent } from './provider-events.js';

export interface ReconcileDeps {
  db: Db;
  clock: Clock;
  providers: Providers;
}

/**
 * The leg whose record tells how the call went: the dialed leg (an outbound call's number, a
 * Twilio caller's ring of the window), bound at its first callback. A parent leg cannot tell: an
 * outbound call's is the window's, which the TwiML App answers at once, and a Twilio caller's
 * rang other agents too. The simulator's inbound call stores the leg that rang the window itself.
 * Null before any callback named the leg: such a call was never reported ringing or answered, and
 * its ring timeout ends it (reaper.ts).
 */
export const RECORDED_LEG_SQL = `(provider_leg_sid IS NOT NULL OR (provider = 'simulated' AND direction = 'inbound' AND provider_call_sid IS NOT NULL))`;

export function recordedLeg(call: Pick<CallRow, 'provider_leg_sid' | 'provider_call_sid' | 'provider' | 'direction'>): string | null {
  if (call.provider_leg_sid !== null) return call.provider_leg_sid;
  return call.provider === 'simulated' && call.direction === 'inbound' ? call.provider_call_sid : null;
}

/**
 * Asks the provider for its record of the call's leg, and applies it when the leg has ended.
 * Answers the record (null: no leg to ask about, or the provider knows none); throws
 * ProviderUnreachable when the provider cannot be asked.
 */
export async function settleFromProviderRecord(
  { db, clock, providers }: ReconcileDeps,
  call: CallRow,
  changes: Changes,
): Promise<ProviderCallRecord | null> {
  const leg = recordedLeg(call);
  if (leg === null) return null;
  const account = await loadProviderAccount(db, call.account_id);
  if (!account) return null;
  const record = await providers.byName(call.provider).callRecord(account, leg);
  if (record === null || !FINAL_CALL_STATUSES.has(record.status)) return record;
  const applied = await applyProviderEvent(db, clock, call.id, {
    callSid: record.callSid,
    parentCallSid: record.parentCallSid,
    status: record.status,
    timestamp: record.endedAt,
    durationSeconds: record.durationSeconds,
  });
  changes.merge(applied.changes);
  return record;
}
