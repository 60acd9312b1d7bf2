/**
 * Dial instructions (TwiML) built with the twilio library, and the public URLs the provider is
 * told to call back. Both drivers get the same instructions; the simulator executes them.
 */
import twilio from 'twilio';
import { API_PREFIX } from '../config.js';

export const PROVIDER_PATHS = {
  voice: `${API_PREFIX}/provider/voice`,
  status: `${API_PREFIX}/provider/status`,
} as const;

export function statusCallbackUrl(publicBaseUrl: string, intentId: string): string {
  return `${publicBaseUrl}${PROVIDER_PATHS.status}?intent=${encodeURIComponent(intentId)}`;
}

export interface DialPlan {
  number: string;
  callerId: string;
  timeLimitSeconds: number;
  statusCallback: string;
}

/** <Dial> the destination with the caller ID and time limit; status callbacks for the dialed leg. */
export function dialTwiml(plan: DialPlan): string {
  const response = new twilio.twiml.VoiceResponse();
  const dial = response.dial({ callerId: plan.callerId, timeLimit: plan.timeLimitSeconds, answerOnBridge: true });
  dial.number(
    { statusCallback: plan.statusCallback, statusCallbackEvent: ['initiated', 'ringing', 'answered', 'completed'], statusCallbackMethod: 'POST' },
    plan.number,
  );
  return response.toString();
}

/** Refuse the call (the intent is unknown, already consumed, or not this engine's). */
export function rejectTwiml(): string {
  const response = new twilio.twiml.VoiceResponse();
  response.reject({ reason: 'rejected' });
  return response.toString();
}
