/**
 * Which calls a provider status callback may move, and from where (spec section 3). The generic
 * forward-only rank in lifecycle.ts is not enough for provider events: it would let a signed
 * callback skip the service's own steps (queued/claimed → connected) or take an inbound call out
 * of `incoming` into `ringing`, where answer and decline no longer apply. Provider events only act
 * on calls the provider drives: outbound dialing → ringing → connected → ended, inbound
 * incoming → connected → ended.
 */
import type { CallStatus } from '../../../shared/types.js';
import type { ProviderCallStatus } from '../../providers/provider.js';
import type { CallRow } from '../views.js';

export type ProviderStep = 'ringing' | 'connected' | 'end';

const FROM: Record<CallRow['direction'], Record<ProviderStep, readonly CallStatus[]>> = {
  outbound: { ringing: ['dialing'], connected: ['dialing', 'ringing'], end: ['dialing', 'ringing', 'connected'] },
  // Twilio reports `ringing` for a <Client> leg too; the spec keeps an inbound call `incoming` until answered.
  inbound: { ringing: [], connected: ['incoming'], end: ['incoming', 'connected'] },
};

/** The step a callback asks for; queued and initiated ask for none. */
export function providerStep(status: ProviderCallStatus): ProviderStep | null {
  if (status === 'queued' || status === 'initiated') return null;
  if (status === 'ringing') return 'ringing';
  if (status === 'in-progress') return 'connected';
  return 'end';
}

/** Whether the call, as locked in the transaction, may take this step. */
export function mayTake(call: Pick<CallRow, 'direction' | 'status'>, step: ProviderStep): boolean {
  return FROM[call.direction][step].includes(call.status);
}

/**
 * Whether a callback is about this call's provider leg. The call stores the parent CallSid (an
 * outbound call's, from the voice webhook; a Twilio inbound call's, the caller's, from the incoming
 * webhook); the <Dial> leg reports with its own CallSid and the parent as ParentCallSid, and the
 * first such leg seen is bound (provider_leg_sid) so no other leg can drive the call. The
 * simulator's inbound call stores the leg that rang the client itself.
 */
export function isOurLeg(call: Pick<CallRow, 'provider_call_sid' | 'provider_leg_sid'>, callSid: string, parentCallSid: string | null): boolean {
  if (callSid === call.provider_call_sid || callSid === call.provider_leg_sid) return true;
  if (call.provider_call_sid === null && call.provider_leg_sid === null) return true; // nothing stored to match
  if (call.provider_leg_sid !== null) return false;
  // only a leg of this call's own parent is bound: a stray callback (another call of the account) is not
  return parentCallSid !== null && parentCallSid === call.provider_call_sid;
}
