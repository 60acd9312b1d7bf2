/**
 * An incoming call Twilio brings to one of an integration's numbers: it rings the routable agent
 * idle longest, on a real window (whose Twilio Device is registered), through the TwiML the
 * incoming webhook answers (routes/provider/incoming.ts). The call is recorded with the caller's
 * leg; the window's leg binds itself with its first status callback (provider-events.ts).
 */
import { isRefusal } from '../../../shared/errors.js';
import type { Changes } from '../changes.js';
import type { CallRow } from '../views.js';
import { routeInbound, type InboundDeps } from './inbound.js';

export interface TwilioIncoming {
  integrationId: string;
  /** the caller's leg */
  callSid: string;
  from: string;
  callerName?: string | undefined;
}

export type IncomingDecision = { ring: CallRow; changes?: Changes } | { refuse: string };

/** The call to ring (recorded now, or by the same webhook before: Twilio may ask again), or why none rings. */
export async function takeTwilioCall(deps: InboundDeps, incoming: TwilioIncoming): Promise<IncomingDecision> {
  const [asked] = await deps.db.query<CallRow>(
    `SELECT * FROM call_intents WHERE integration_id = $1 AND provider_call_sid = $2 AND direction = 'inbound' AND provider = 'twilio'`,
    [incoming.integrationId, incoming.callSid],
  );
  if (asked) return asked.status === 'incoming' ? { ring: asked } : { refuse: `the call is ${asked.status} already` };
  try {
    const { call, changes } = await routeInbound(
      deps,
      { integrationId: incoming.integrationId, from: incoming.from, callerName: incoming.callerName },
      { provider: 'twilio', windows: 'real', ring: async () => incoming.callSid, abandon: async () => {} },
    );
    return { ring: call, changes };
  } catch (error) {
    // Nobody to take it, a withheld or invalid caller number, the integration disabled: the caller
    // hears it refused. The store failing is not a refusal: Twilio then tries the number's fallback.
    if (isRefusal(error)) return { refuse: error.code };
    throw error;
  }
}
