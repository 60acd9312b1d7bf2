/**
 * Provider status callbacks (ringing, answered, completed, busy, no-answer, failed, canceled)
 * applied to the intent. Forward-only: a duplicate or out-of-order callback changes nothing, but
 * for one: a `completed` with talk time for a call the service ended unanswered (a
 * hangup racing the answer) makes it completed and billed (lifecycle.ts, reviseAsAnswered). The
 * answer and end times are the provider's (its Timestamp, bounded by the call's creation and now),
 * so a callback delivered late is not billed for its delay.
 *
 * Everything is decided from the row locked in the transaction: callbacks for one call arrive
 * close together and in any order (Twilio does not guarantee order), so a row read before the
 * transaction may already be stale (an `in-progress` committed meanwhile).
 */
import type { Clock } from '../../clock.js';
import type { ProviderCallStatus } from '../../providers/provider.js';
import type { Db } from '../../store/index.js';
import { Changes } from '../changes.js';
import { isTerminal, type CallRow } from '../views.js';
import { advanceCall, askedEnd, finishCall, reviseAsAnswered, type Finish } from './lifecycle.js';
import { isOurLeg, mayTake, providerStep } from './provider-transitions.js';

export interface ProviderEvent {
  callSid: string;
  /** ParentCallSid, sent for a <Dial> leg (the dialed number of an outbound call, the window's client of a Twilio inbound one) */
  parentCallSid: string | null;
  status: ProviderCallStatus;
  /** the provider's time of the event, Unix ms, when it sent one */
  timestamp: number | null;
  /** CallDuration in seconds, sent with `completed` */
  durationSeconds: number | null;
}

export interface ProviderEventResult {
  changes: Changes;
  /** why the callback changed nothing, for the log */
  ignored: string | null;
  /** the call as the event ended it, committed (none when it ended nothing) */
  ended?: CallRow;
}

/**
 * A leg ended by a hangup may be stamped before it was asked: Twilio's timestamps have whole
 * seconds, and its clock is not this node's. Only an end stamped well before is taken as the far end's.
 */
const ENDED_BEFORE_ASKED_MARGIN_MS = 5_000;

export async function applyProviderEvent(db: Db, clock: Clock, callId: string, event: ProviderEvent): Promise<ProviderEventResult> {
  const changes = new Changes();
  const now = clock.now();
  let ended: CallRow | undefined;
  const ignored = await db.tx(async (sql): Promise<string | null> => {
    const [call] = await sql.query<CallRow>('SELECT * FROM call_intents WHERE id = $1 FOR UPDATE', [callId]);
    if (!call) return 'unknown call';
    // The leg is bound at its first callback, `initiated` and an inbound `ringing` included (they
    // move nothing): a decline then ends that leg alone, and Twilio rings the next agent (hangup.ts).
    const unbound = call.provider_call_sid !== null && call.provider_leg_sid === null && event.callSid !== call.provider_call_sid;
    if (unbound && !isTerminal(call.status) && isOurLeg(call, event.callSid, event.parentCallSid)) {
      await sql.query('UPDATE call_intents SET provider_leg_sid = $2 WHERE id = $1', [call.id, event.callSid]);
      call.provider_leg_sid = event.callSid;
    }
    const step = providerStep(event.status);
    if (step === null) return null;
    // The provider's clock decides the answer and end moments, but never a moment in the future or before the call.
    const eventTime = event.timestamp !== null && event.timestamp <= now && event.timestamp >= call.created_at ? event.timestamp : now;
    if (!mayTake(call, step)) {
      if (event.status === 'completed' && isOurLeg(call, event.callSid, event.parentCallSid)) {
        const answeredAt = answeredFromDuration(call, event, eventTime);
        if (answeredAt !== null && (await reviseAsAnswered(sql, changes, now, call.id, answeredAt, eventTime))) return null;
      }
      return `${event.status} does not apply to a ${call.direction} ${call.status} call`;
    }
    if (!isOurLeg(call, event.callSid, event.parentCallSid)) return 'CallSid is not this call\'s provider leg';
    // The service asked the provider to end the call (calls/hangup.ts): its end is the one asked
    // for (askedEnd), whichever of the hangup's own record and this callback comes first.
    const hungUp = call.hangup_requested_at !== null;
    switch (event.status) {
      case 'ringing':
        await advanceCall(sql, changes, call.id, 'ringing', { ringing_at: eventTime });
        return null;
      case 'in-progress':
        await advanceCall(sql, changes, call.id, 'connected', { answered_at: eventTime });
        return null;
      case 'completed': {
        // A `completed` that overtook `in-progress` still says the call was answered: CallDuration > 0.
        const answeredAt = call.answered_at ?? answeredFromDuration(call, event, eventTime);
        // A leg that ended before the hangup was asked (by more than the stamps' precision and
        // the clocks' difference can blur) ended on its own: the far end hung up, and the hangup found the
        // call ended already (its record read in place of this callback: calls/hangup.ts).
        const endedBeforeAsked = hungUp && eventTime < call.hangup_requested_at! - ENDED_BEFORE_ASKED_MARGIN_MS;
        const asked = hungUp && !endedBeforeAsked ? askedEnd(call) : null;
        ended = await finishCall(sql, changes, now, call.id, {
          status: answeredAt !== null ? 'completed' : (asked?.status ?? 'no_answer'),
          reason: asked?.reason ?? 'far_end',
          answeredAt,
          endedAt: eventTime,
        });
        return null;
      }
      case 'busy':
      case 'no-answer':
      case 'failed':
      case 'canceled':
        // An end the service asked for is the one it asked for: a decline ends the caller's leg, and
        // the window's leg may report that busy, no-answer or canceled before the hangup's answer. An
        // outbound call's busy, no-answer or failed is the far end's own answer, kept as before (its
        // hangup may have been uncertain, and never reached the provider).
        if (hungUp && (event.status === 'canceled' || call.direction === 'inbound')) {
          ended = await finishCall(sql, changes, now, call.id, { ...askedEnd(call), endedAt: eventTime });
          return null;
        }
        ended = await finishCall(sql, changes, now, call.id, { ...UNASKED_ENDS[event.status](call), endedAt: eventTime });
        return null;
      default:
        return null;
    }
  });
  return { changes, ignored, ...(ended ? { ended } : {}) };
}

/** How the provider's own unanswered ends end a call (none was asked for). */
const UNASKED_ENDS: Record<'busy' | 'no-answer' | 'failed' | 'canceled', (call: CallRow) => Omit<Finish, 'endedAt'>> = {
  // An inbound leg that is "busy" was declined by the agent's device.
  busy: (call) => (call.direction === 'inbound' ? { status: 'rejected', reason: 'declined' } : { status: 'busy', reason: 'provider', error: 'busy' }),
  'no-answer': () => ({ status: 'no_answer', reason: 'provider', error: 'no_answer' }),
  failed: () => ({ status: 'failed', reason: 'provider', error: 'provider_failed' }),
  canceled: () => ({ status: 'canceled', reason: 'provider' }),
};

/**
 * The answer moment implied by a final callback: its time (Timestamp, else now) less CallDuration,
 * never before the call was dialed. Null when the callback says the call was not answered.
 */
function answeredFromDuration(call: CallRow, event: ProviderEvent, endedAt: number): number | null {
  if (event.durationSeconds === null || event.durationSeconds <= 0) return null;
  return Math.max(endedAt - event.durationSeconds * 1000, call.dialing_at ?? call.created_at);
}
