/**
 * The voice provider interface, shaped after Twilio: an access token for an engine identity, REST
 * hangup of a leg, and webhooks (routes/provider) that consume an intent and receive status
 * callbacks, signed with Twilio's scheme. The Twilio driver and the simulator implement it alike;
 * the simulator additionally plays the part of the browser voice SDK for simulated engines.
 */

/** The provider account a call or token belongs to (the billing owner's). */
export interface ProviderAccount {
  accountId: string;
  accountSid: string;
  authToken: string;
  /** the API key access tokens are signed with (Twilio's SK…, and its secret); null until set */
  apiKey: { sid: string; secret: string } | null;
  /** the TwiML App a window's outgoing calls go through (Twilio's AP…); null until set */
  twimlAppSid: string | null;
}

export interface AccessToken {
  token: string;
  /** Unix milliseconds */
  expiresAt: number;
}

/** An inbound call rings the agent's window for this long before it is no-answer (either provider). */
export const INBOUND_RING_SECONDS = 30;

/** The provider could not be reached (hangup answers 502 hangup_uncertain). */
export class ProviderUnreachable extends Error {
  /**
   * The provider answered, refusing this account alone (its credentials refused, the account
   * suspended): the provider itself is up for the other accounts.
   */
  readonly accountOnly: boolean;

  constructor(message: string, { accountOnly = false }: { accountOnly?: boolean } = {}) {
    super(message);
    this.accountOnly = accountOnly;
  }
}

/** The provider cannot issue a token now (voice-token answers 503). */
export class ProviderUnavailable extends Error {}

export type ProviderName = 'simulated' | 'twilio';

/** What a hangup did: ended the call, or found it ended already. */
export type HangupOutcome = 'ended' | 'ended-already';

export interface VoiceProvider {
  readonly name: ProviderName;
  accessToken(account: ProviderAccount, identity: string, ttlSeconds: number): Promise<AccessToken>;
  /**
   * Ends a call (the parent leg, and with it the dialed leg) through the provider's REST API.
   * Idempotent: ending a call that has ended succeeds and changes nothing (a widget's retried
   * hangup can race its first attempt; commands/service.ts). `ended-already` when the provider
   * said the call had ended before this asked (its end, and talk time, are then the provider's
   * record's, not this moment's: calls/hangup.ts).
   */
  hangup(account: ProviderAccount, callSid: string): Promise<HangupOutcome>;
  /**
   * The provider's own record of a call leg (Twilio's call resource): what the reaper reads for a
   * call whose final callback never came (calls/provider-records.ts). Null when the provider knows no such
   * leg (never its own, or forgotten). Throws ProviderUnreachable when it cannot be asked.
   */
  callRecord(account: ProviderAccount, callSid: string): Promise<ProviderCallRecord | null>;
  /**
   * The record of the leg a parent leg dialed (its <Dial>: an outbound call's number; a caller's
   * ring of one window), found by the parent's sid and, where it dialed several, by whom it
   * dialed (`to`: Twilio's `client:<identity>` of that window): for a call none of whose dialed
   * leg's callbacks came, so that the leg was never bound (calls/provider-records.ts). The newest
   * such leg; null when the provider knows none. Throws ProviderUnreachable as callRecord.
   */
  dialedLegRecord(account: ProviderAccount, parentCallSid: string, to?: string): Promise<ProviderCallRecord | null>;
  /** hangups that failed with ProviderUnreachable since the node started (/metrics) */
  readonly hangupFailures: number;
}

/** A call leg as the provider records it; the fields its final status callback would carry. */
export interface ProviderCallRecord {
  callSid: string;
  parentCallSid: string | null;
  status: ProviderCallStatus;
  /** when the leg ended, Unix ms; null while it runs */
  endedAt: number | null;
  /** its talk time in seconds once it ended (Twilio's duration, the callback's CallDuration) */
  durationSeconds: number | null;
}

/** The statuses a leg ends in: its record then stands for its final callback. */
export const FINAL_CALL_STATUSES: ReadonlySet<ProviderCallStatus> = new Set(['completed', 'busy', 'no-answer', 'failed', 'canceled']);

/** Provider status callback values (Twilio's CallStatus). */
export type ProviderCallStatus = 'queued' | 'initiated' | 'ringing' | 'in-progress' | 'completed' | 'busy' | 'no-answer' | 'failed' | 'canceled';
