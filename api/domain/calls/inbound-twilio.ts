/**
 * An incoming call Twilio brings to one of an integration's numbers: it rings the routable agent
 * idle longest, on a real window (whose Twilio Device is registered), through the TwiML the
 * incoming webhook answers (routes/provider/incoming.ts). The call is recorded with the caller's
 * leg; the window's leg (whose ParentCallSid is the caller's) is bound by the first status callback
 * that moves the call (provider-events.ts).
 *
 * When that ring ends unanswered (the agent let it ring out, declined it, or the window's leg
 * failed), Twilio asks the <Dial>'s action what follows, and the next routable agent rings: a new
 * intent on the same caller's leg, numbered in turn (ring_attempt), never an agent already rung,
 * at most INBOUND_MAX_RINGS agents. Nobody left to ring ends the caller's leg.
 */
import { isRefusal } from '../../../shared/errors.js';
import { isUniqueViolation } from '../../store/db.js';
import { Changes } from '../changes.js';
import type { CallRow } from '../views.js';
import { routeInbound, type InboundDeps } from './inbound.js';
import { passesCallerOn, type EndReason } from './lifecycle.js';
import { applyProviderEvent } from './provider-events.js';

/**
 * How many agents one caller rings in turn, 30 s each (INBOUND_RING_SECONDS): two minutes at most
 * before the caller's leg ends, rather than ringing round an idle team for ever.
 */
export const INBOUND_MAX_RINGS = 4;

export interface TwilioIncoming {
  integrationId: string;
  /** the caller's leg */
  callSid: string;
  /** null: the caller withheld the number */
  from: string | null;
  callerName?: string | undefined;
}

/** The ring to ring, or why no agent rings. */
export type IncomingDecision = { ring: CallRow; changes?: Changes } | { noRing: string; changes?: Changes };

/** The call to ring (recorded now, or by the same webhook before: Twilio may ask again), or why none rings. */
export function takeTwilioCall(deps: InboundDeps, incoming: TwilioIncoming): Promise<IncomingDecision> {
  return ringOnce(deps, incoming, 1, []);
}

/** Twilio's account of how an incoming call's ring ended: the <Dial> action's parameters. */
export interface RingEnded {
  /** the caller's leg (CallSid) and its CallStatus now: a caller who hung up is gone */
  callSid: string;
  callStatus: string | null;
  /** DialCallStatus: completed, answered, busy, no-answer, failed or canceled */
  dialStatus: 'completed' | 'answered' | 'busy' | 'no-answer' | 'failed' | 'canceled';
  /** the window's leg, DialCallSid, when Twilio made one */
  dialCallSid: string | null;
  dialDurationSeconds: number | null;
}

/** The caller's leg is over or ending: no other agent rings. */
const CALLER_GONE: ReadonlySet<string> = new Set(['completed', 'canceled', 'busy', 'failed', 'no-answer']);

/**
 * A ring of `call` ended, as Twilio says: its end is recorded here when its status callback has
 * not come yet (Twilio does not order them). The changes are the caller's to publish before it asks
 * what follows (passOn): that may fail (the store), and this end is committed by then, which its
 * agent's widget and window must hear of at once, not when their caches lapse.
 */
export async function recordRingEnd(deps: InboundDeps, call: CallRow, ended: RingEnded): Promise<Changes> {
  const changes = new Changes();
  const answered = ended.dialStatus === 'answered' || ended.dialStatus === 'completed';
  const talked = answered && (ended.dialDurationSeconds ?? 0) > 0;
  // An answer without its talk time is left to the leg's callbacks (or the reaper): it cannot be
  // billed from here. Unless the service asked for the end: a leg it ended may be reported as any
  // status, and the end is the one asked for (provider-events.ts). A call the service ended while it
  // still took it for ringing (a hangup before Twilio's report of the answer came, or with that
  // report lost) that Twilio says was answered and talked is revised as answered (reviseAsAnswered).
  if (call.status === 'incoming' ? !answered || talked || call.hangup_requested_at !== null : talked) {
    const applied = await applyProviderEvent(deps.db, deps.clock, call.id, {
      callSid: ended.dialCallSid ?? ended.callSid,
      parentCallSid: ended.callSid,
      status: ended.dialStatus === 'answered' ? 'completed' : ended.dialStatus,
      timestamp: null,
      durationSeconds: ended.dialDurationSeconds,
    });
    changes.merge(applied.changes);
  }
  return changes;
}

/**
 * What follows a ring of `call` whose end is recorded (recordRingEnd): the next agent's ring, or why
 * the caller's leg ends (answered and over, the caller gone, nobody else to ring). The record
 * decides (a decline ends the window's leg, which Twilio may report as any status).
 */
export async function passOn(deps: InboundDeps, call: CallRow, ended: RingEnded): Promise<IncomingDecision> {
  const rung = (await deps.db.query<CallRow>('SELECT * FROM call_intents WHERE id = $1', [call.id]))[0] ?? call;
  // Twilio's word that the window's leg talked stands even where the record could not be revised
  // (a call ended for the provider's own reason): a caller who has just spoken to an agent is not
  // rung on to the next one.
  if (rung.answered_at !== null || ((ended.dialStatus === 'completed' || ended.dialStatus === 'answered') && (ended.dialDurationSeconds ?? 0) > 0)) {
    return { noRing: 'the call was answered' };
  }
  // Answered by Twilio's account but not (yet) by the record, or an end that is not this call's leg's.
  if (rung.status === 'incoming') return { noRing: `the ring ended ${ended.dialStatus}, not recorded` };
  if (ended.callStatus !== null && CALLER_GONE.has(ended.callStatus)) return { noRing: 'the caller hung up' };
  // An end asked for that was to end the caller's call too (the backend's hang up, whose request to
  // Twilio may have failed): the caller is not rung on under a call the backend never saw.
  if (rung.hangup_reason !== null && !passesCallerOn(rung.hangup_reason as EndReason)) return { noRing: `the call was ended (${rung.hangup_reason})` };
  if (rung.ring_attempt >= INBOUND_MAX_RINGS) return { noRing: `${INBOUND_MAX_RINGS} agents rang` };
  const passedOver = await deps.db.query<{ member_id: string }>(
    `SELECT member_id FROM call_intents WHERE provider_call_sid = $1 AND integration_id = $2 AND direction = 'inbound' AND provider = 'twilio'`,
    [ended.callSid, rung.integration_id],
  );
  return ringOnce(
    deps,
    { integrationId: rung.integration_id, callSid: ended.callSid, from: rung.phone_number, callerName: rung.display_name ?? undefined },
    rung.ring_attempt + 1,
    passedOver.map((row) => row.member_id),
  );
}

/** Records and rings ring number `attempt` of the caller's leg, or says why none rings. */
async function ringOnce(deps: InboundDeps, incoming: TwilioIncoming, attempt: number, passedOver: readonly string[]): Promise<IncomingDecision> {
  const asked = await recorded(deps, incoming, attempt);
  if (asked) return asked;
  try {
    const { call, changes } = await routeInbound(
      deps,
      { integrationId: incoming.integrationId, from: incoming.from, callerName: incoming.callerName, passedOver, ringAttempt: attempt },
      { provider: 'twilio', windows: 'real', ring: async () => incoming.callSid, abandon: async () => {} },
    );
    return { ring: call, changes };
  } catch (error) {
    // The same webhook asked again while the first was under way (a retry after a timeout, a
    // fallback URL that is this one): the first recorded the ring meanwhile, which then took its
    // agent (a refusal here) or its CallSid and number (unique, migration 019). Both are answered that ring.
    const duplicate = isUniqueViolation(error);
    if (duplicate || isRefusal(error)) {
      const first = await recorded(deps, incoming, attempt);
      if (first) return first;
    }
    if (duplicate) return { noRing: "the CallSid is another integration's call" };
    // Nobody to take it, the integration disabled or not taking incoming calls: the caller hears
    // it refused. The store failing is not a refusal: Twilio then tries the number's fallback.
    if (isRefusal(error)) return { noRing: error.code };
    throw error;
  }
}

/** What a ring already recorded for this CallSid and number decides: ring it again while it rings, else refuse. */
async function recorded(deps: InboundDeps, incoming: TwilioIncoming, attempt: number): Promise<IncomingDecision | null> {
  const [asked] = await deps.db.query<CallRow>(
    `SELECT * FROM call_intents WHERE provider_call_sid = $1 AND ring_attempt = $3 AND direction = 'inbound' AND provider = 'twilio' AND integration_id = $2`,
    [incoming.callSid, incoming.integrationId, attempt],
  );
  if (!asked) return null;
  return asked.status === 'incoming' ? { ring: asked } : { noRing: `the call is ${asked.status} already` };
}
