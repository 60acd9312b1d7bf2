/**
 * Dial instructions (TwiML) built with the twilio library, and the public URLs the provider is
 * told to call back. Both drivers get the same outgoing instructions; the simulator executes them.
 * Incoming calls are rung by TwiML on Twilio only (the simulator rings its client itself).
 */
import twilio from 'twilio';
import { INCOMING_CALL_PARAMETER } from '../../shared/prefixes.js';
import { API_PREFIX } from '../config.js';

export const PROVIDER_PATHS = {
  voice: `${API_PREFIX}/provider/voice`,
  status: `${API_PREFIX}/provider/status`,
  /** a number's incoming calls (the voice URL of each number given with `c2c integration numbers`) */
  incoming: `${API_PREFIX}/provider/incoming`,
  /** the incoming <Dial>'s action: its ring ended, answered or not (the next agent rings, or the caller's leg ends) */
  ringEnded: `${API_PREFIX}/provider/incoming/ring-ended`,
} as const;

export function statusCallbackUrl(publicBaseUrl: string, intentId: string): string {
  return `${publicBaseUrl}${PROVIDER_PATHS.status}?intent=${encodeURIComponent(intentId)}`;
}

/** Where Twilio asks what follows an incoming call's ring on this intent. */
export function ringEndedUrl(publicBaseUrl: string, intentId: string): string {
  return `${publicBaseUrl}${PROVIDER_PATHS.ringEnded}?intent=${encodeURIComponent(intentId)}`;
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

export interface RingPlan {
  /** the window's client identity, c2c_<engine_id> */
  identity: string;
  /**
   * the caller ID the window's Device is rung with: the number the caller called (the
   * integration's own). Without one Twilio passes the caller's number on, into the browser's
   * Device (its `parameters.From`), whatever the policy shows of it: the window shows the number
   * the service's projection gives it, hidden or masked where the policy says so.
   */
  callerId: string;
  /** named to the window's Device as the custom parameter INCOMING_CALL_PARAMETER (window/src/drivers/twilio.ts) */
  intentId: string;
  ringSeconds: number;
  timeLimitSeconds: number;
  statusCallback: string;
  /** asked when the ring ends, answered or not (ringEndedUrl) */
  action: string;
}

/**
 * <Dial> the agent's window as a client, naming the call; status callbacks for that leg. When the
 * <Dial> ends, Twilio asks its action what the caller's leg does next. answerOnBridge: the caller's
 * leg stays unanswered (the caller hears ringing) until an agent answers, through every agent rung
 * in turn; by Twilio's default the first <Dial> answers it, and the caller's carrier bills the
 * caller, and Twilio the account, for rings nobody took.
 */
export function ringClientTwiml(plan: RingPlan): string {
  const response = new twilio.twiml.VoiceResponse();
  const dial = response.dial({
    callerId: plan.callerId,
    timeout: plan.ringSeconds,
    timeLimit: plan.timeLimitSeconds,
    action: plan.action,
    method: 'POST',
    answerOnBridge: true,
  });
  const client = dial.client({
    statusCallback: plan.statusCallback,
    statusCallbackEvent: ['initiated', 'ringing', 'answered', 'completed'],
    statusCallbackMethod: 'POST',
  });
  client.identity(plan.identity);
  client.parameter({ name: INCOMING_CALL_PARAMETER, value: plan.intentId });
  return response.toString();
}

/**
 * Refuse the call: `rejected` (the intent is unknown, already consumed, or not this engine's), or
 * `busy` (an incoming call nobody can take: the caller hears a busy tone).
 */
export function rejectTwiml(reason: 'rejected' | 'busy' = 'rejected'): string {
  const response = new twilio.twiml.VoiceResponse();
  response.reject({ reason });
  return response.toString();
}

/** End the caller's leg: after an answered call, or when no other agent can take it. */
export function hangupTwiml(): string {
  const response = new twilio.twiml.VoiceResponse();
  response.hangup();
  return response.toString();
}
