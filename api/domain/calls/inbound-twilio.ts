/**
 * An incoming call Twilio brings to one of an integration's numbers: it rings the routable agent
 * idle longest, on a real window (whose Twilio Device is registered), through the TwiML the
 * incoming webhook answers (routes/provider/incoming.ts). The call is recorded with the caller's
 * leg; the window's leg (whose ParentCallSid is the caller's) is bound by the first status callback
 * that moves the call (provider-events.ts).
 */
import { isRefusal } from '../../../shared/errors.js';
import { isUniqueViolation } from '../../store/db.js';
import type { Changes } from '../changes.js';
import type { CallRow } from '../views.js';
import { routeInbound, type InboundDeps } from './inbound.js';

export interface TwilioIncoming {
  integrationId: string;
  /** the caller's leg */
  callSid: string;
  /** null: the caller withheld the number */
  from: string | null;
  callerName?: string | undefined;
}

export type IncomingDecision = { ring: CallRow; changes?: Changes } | { refuse: string };

/** The call to ring (recorded now, or by the same webhook before: Twilio may ask again), or why none rings. */
export async function takeTwilioCall(deps: InboundDeps, incoming: TwilioIncoming): Promise<IncomingDecision> {
  const asked = await recorded(deps, incoming);
  if (asked) return asked;
  try {
    const { call, changes } = await routeInbound(
      deps,
      { integrationId: incoming.integrationId, from: incoming.from, callerName: incoming.callerName },
      { provider: 'twilio', windows: 'real', ring: async () => incoming.callSid, abandon: async () => {} },
    );
    return { ring: call, changes };
  } catch (error) {
    // The same webhook asked again while the first was under way (a retry after a timeout, a
    // fallback URL that is this one): the first recorded the call meanwhile, which then took its
    // agent (a refusal here) or its CallSid (unique, migration 002). Both are answered that call.
    const duplicate = isUniqueViolation(error);
    if (duplicate || isRefusal(error)) {
      const first = await recorded(deps, incoming);
      if (first) return first;
    }
    if (duplicate) return { refuse: "the CallSid is another integration's call" };
    // Nobody to take it, the integration disabled or not taking incoming calls: the caller hears
    // it refused. The store failing is not a refusal: Twilio then tries the number's fallback.
    if (isRefusal(error)) return { refuse: error.code };
    throw error;
  }
}

/** What a call already recorded for this CallSid decides: ring it again while it rings, else refuse. */
async function recorded(deps: InboundDeps, incoming: TwilioIncoming): Promise<IncomingDecision | null> {
  const [asked] = await deps.db.query<CallRow>(
    `SELECT * FROM call_intents WHERE provider_call_sid = $1 AND direction = 'inbound' AND provider = 'twilio' AND integration_id = $2`,
    [incoming.callSid, incoming.integrationId],
  );
  if (!asked) return null;
  return asked.status === 'incoming' ? { ring: asked } : { refuse: `the call is ${asked.status} already` };
}
