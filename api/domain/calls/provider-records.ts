/**
 * A call whose final status callback never came, settled from the provider's own record of it.
 * Twilio does not retry a callback this service answered with an error (a store blip answers
 * 503), so such a call would stay live in the store: its agent busy with it, and the call billed
 * up to its time limit. The reaper asks the provider about a call its window no longer holds, and
 * about one overdue, before it ends it itself (reaper.ts). A final record is applied as the final
 * callback it stands for (provider-events.ts): the same rules, with the provider's end time and
 * talk time. A record of a leg in progress is applied as the answer of a call the store still
 * has unanswered (that callback was lost too), and otherwise changes nothing.
 */
import { LIMITS } from '../../../shared/limits.js';
import { engineIdentity } from '../../../shared/prefixes.js';
import type { Clock } from '../../clock.js';
import { FINAL_CALL_STATUSES, type ProviderCallRecord } from '../../providers/provider.js';
import { loadProviderAccount, type Providers } from '../../providers/index.js';
import type { Db } from '../../store/index.js';
import { Changes } from '../changes.js';
import type { CallRow } from '../views.js';
import { applyProviderEvent } from './provider-events.js';

export interface ProviderRecordDeps {
  db: Db;
  clock: Clock;
  providers: Providers;
}

/**
 * The leg whose record tells how the call went: the dialed leg (an outbound call's number, a
 * Twilio caller's ring of the window), bound at its first callback. A parent leg cannot tell: an
 * outbound call's is the window's, which the TwiML App answers at once, and a Twilio caller's
 * rang other agents too. The simulator's inbound call stores the leg that rang the window itself.
 * A call whose dialed leg no callback named (every one of them lost: a store outage through the
 * whole call) has it found under the parent that dialed it, and bound by the record: an outbound
 * call's only child of the window's leg; a Twilio caller's ring of this call's window, told from
 * its rings of other agents by the window's client identity (a caller never rings one window
 * twice: inbound-twilio.ts). Null for a call never dialed.
 */
export type RecordedLeg = { sid: string } | { dialedBy: string; to?: string };

export const RECORDED_LEG_SQL = `(provider_leg_sid IS NOT NULL OR (provider_call_sid IS NOT NULL AND (direction = 'outbound' OR provider = 'simulated' OR engine_id IS NOT NULL)))`;

export function recordedLeg(call: Pick<CallRow, 'provider_leg_sid' | 'provider_call_sid' | 'provider' | 'direction' | 'engine_id'>): RecordedLeg | null {
  if (call.provider_leg_sid !== null) return { sid: call.provider_leg_sid };
  if (call.provider_call_sid === null) return null;
  if (call.direction === 'outbound') return { dialedBy: call.provider_call_sid };
  if (call.provider === 'simulated') return { sid: call.provider_call_sid };
  return call.engine_id === null ? null : { dialedBy: call.provider_call_sid, to: `client:${engineIdentity(call.engine_id)}` };
}

export interface Settled {
  /** the provider's record; null when there is no leg to ask about, or the provider knows none */
  record: ProviderCallRecord | null;
  /** the record ended the call (its leg ended, and the call was still live here) */
  ended: boolean;
  /** the record answered a call the store had unanswered (its answer's callback was lost) */
  answered: boolean;
  /** the call as the record ended it, committed */
  call?: CallRow;
}

/**
 * Asks the provider for its record of the call's leg, and applies what it tells: a leg that ended
 * ends the call (the final callback it stands for); a leg in progress answers a call the store
 * has unanswered, at the moment of the read (the record does not say when the far end answered:
 * this is the latest it can have been, so the call is billed for no more than was talked), unless
 * the call is past its time limit, when the provider would have ended any leg of it (the reaper
 * ends it then). Throws ProviderUnreachable when the provider cannot be asked.
 */
export async function settleFromProviderRecord({ db, clock, providers }: ProviderRecordDeps, call: CallRow, changes: Changes): Promise<Settled> {
  const leg = recordedLeg(call);
  const account = leg === null ? undefined : await loadProviderAccount(db, call.account_id);
  if (leg === null || !account) return { record: null, ended: false, answered: false };
  const provider = providers.byName(call.provider);
  const record = 'sid' in leg ? await provider.callRecord(account, leg.sid) : await provider.dialedLegRecord(account, leg.dialedBy, leg.to);
  const final = record !== null && FINAL_CALL_STATUSES.has(record.status);
  const answers = record !== null && record.status === 'in-progress' && call.answered_at === null && withinTimeLimit(call, clock.now());
  if (!final && !answers) return { record, ended: false, answered: false };
  const applied = await applyProviderEvent(db, clock, call.id, {
    callSid: record!.callSid,
    parentCallSid: record!.parentCallSid,
    status: record!.status,
    timestamp: final ? record!.endedAt : null,
    durationSeconds: record!.durationSeconds,
  });
  changes.merge(applied.changes);
  // ignored: the call moved on meanwhile (its callback came after all), or the record is not its leg's
  const took = applied.ignored === null;
  return { record, ended: final && took, answered: answers && took, ...(applied.ended ? { call: applied.ended } : {}) };
}

/** Whether a call dialed (or, incoming, rung) this long ago is still within its provider time limit. */
function withinTimeLimit(call: CallRow, now: number): boolean {
  return (call.dialing_at ?? call.created_at) + (call.time_limit_seconds ?? LIMITS.platformMaxCallSeconds) * 1000 > now;
}
