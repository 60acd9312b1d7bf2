/**
 * The Twilio voice provider, server side: access tokens for call windows, and hangups and call
 * records through Twilio's REST API, all with the twilio library. The rest of the Twilio path is shared with the
 * simulator: the webhooks Twilio calls (routes/provider: the TwiML App's voice URL, and status
 * callbacks), their signatures (signature.ts) and the TwiML they answer (twiml.ts). The call
 * window's Twilio Device places and takes the calls (window/src/drivers/twilio.ts).
 */
import twilio from 'twilio';
import type { CallInstance, CallListInstance } from 'twilio/lib/rest/api/v2010/account/call.js';
import type { Clock } from '../../clock.js';
import {
  FINAL_CALL_STATUSES,
  ProviderUnavailable,
  ProviderUnreachable,
  type AccessToken,
  type HangupOutcome,
  type ProviderAccount,
  type ProviderCallRecord,
  type ProviderCallStatus,
  type VoiceProvider,
} from '../provider.js';
import { RebasedRequestClient } from './rest-client.js';

export interface TwilioOptions {
  /** where Twilio's REST API is reached instead of https://api.twilio.com (an egress proxy; a test's stand-in) */
  apiBaseUrl: string | undefined;
  /** a REST request unanswered this long is given up: the hangup is then uncertain */
  timeoutMs: number;
}

/**
 * Twilio's answers to ending a call that cannot be ended because it is not running: 20404 (no
 * such call: none to end) and 21220 (the call is not in a state that can change, i.e. it ended).
 * The interface wants hangup idempotent: a widget's retried hangup can race its first attempt.
 */
const ENDED_ALREADY: ReadonlySet<number> = new Set([20404, 21220]);
/** Twilio's answer for a resource it does not have. */
const NOT_FOUND = 20404;
const STATUSES: ReadonlySet<string> = new Set<ProviderCallStatus>(['queued', 'initiated', 'ringing', 'in-progress', 'completed', 'busy', 'no-answer', 'failed', 'canceled']);

export class TwilioProvider implements VoiceProvider {
  readonly name = 'twilio' as const;
  /** one HTTP client (and keep-alive agent) for every account's requests */
  readonly #http: twilio.RequestClient;
  #hangupFailures = 0;

  constructor(
    private readonly clock: Clock,
    options: TwilioOptions,
  ) {
    const clientOptions = { timeout: options.timeoutMs, keepAlive: true };
    this.#http = options.apiBaseUrl ? new RebasedRequestClient(options.apiBaseUrl, clientOptions) : new twilio.RequestClient(clientOptions);
  }

  get hangupFailures(): number {
    return this.#hangupFailures;
  }

  async accessToken(account: ProviderAccount, identity: string, ttlSeconds: number): Promise<AccessToken> {
    // Twilio refuses tokens signed with the auth token, and a Device without an application cannot
    // place calls: an account without both cannot have a working window, and the operator is told what to set.
    if (!account.apiKey || !account.twimlAppSid) {
      throw new ProviderUnavailable(`account ${account.accountId} has no Twilio API key or TwiML App: set them with c2c account set-provider`);
    }
    // The library stamps the token with the system time, the only time Twilio accepts.
    const token = new twilio.jwt.AccessToken(account.accountSid, account.apiKey.sid, account.apiKey.secret, { identity, ttl: ttlSeconds });
    token.addGrant(new twilio.jwt.AccessToken.VoiceGrant({ incomingAllow: true, outgoingApplicationSid: account.twimlAppSid }));
    return { token: token.toJwt(), expiresAt: this.clock.now() + ttlSeconds * 1000 };
  }

  async hangup(account: ProviderAccount, callSid: string): Promise<HangupOutcome> {
    const client = twilio(account.accountSid, account.authToken, { httpClient: this.#http });
    try {
      // `completed` ends a call whatever its state (`canceled` would leave one in progress running);
      // ending the parent leg (the window's when outgoing, the caller's when incoming) ends the dialed leg with it.
      await client.api.v2010.accounts(account.accountSid).calls(callSid).update({ status: 'completed' });
      return 'ended';
    } catch (error) {
      if (error instanceof twilio.RestException && error.code !== undefined && ENDED_ALREADY.has(error.code)) return 'ended-already';
      this.#hangupFailures += 1;
      // Said without the error itself: the HTTP client's error carries the request, credentials included.
      throw new ProviderUnreachable(`Twilio did not end call ${callSid}: ${describe(error)}`, { accountOnly: refusedAccount(error) });
    }
  }

  async callRecord(account: ProviderAccount, callSid: string): Promise<ProviderCallRecord | null> {
    const call = await this.#read(account, `call ${callSid}`, (calls) => calls(callSid).fetch());
    return call && record(call);
  }

  async dialedLegRecord(account: ProviderAccount, parentCallSid: string, to?: string): Promise<ProviderCallRecord | null> {
    // GET …/Calls.json?ParentCallSid=[&To=]: an outbound call's <Dial><Number> makes one child
    // leg; a caller's leg one <Dial><Client> per agent it rang, told apart by the client
    const legs = await this.#read(account, `the legs call ${parentCallSid} dialed`, (calls) => calls.list({ parentCallSid, ...(to === undefined ? {} : { to }), limit: 20 }));
    // One <Client> may ring several devices of one identity (a window open twice), each its own
    // leg: the one that carried the call tells how it went, whichever was made last.
    const [best] = (legs ?? []).sort((a, b) => carried(a) - carried(b) || (time(b.dateCreated) ?? 0) - (time(a.dateCreated) ?? 0));
    return best ? record(best) : null;
  }

  /** A read of the account's call resources; null for Twilio's 20404 (it has no such resource). */
  async #read<T>(account: ProviderAccount, what: string, read: (calls: CallListInstance) => Promise<T>): Promise<T | null> {
    const client = twilio(account.accountSid, account.authToken, { httpClient: this.#http });
    try {
      return await read(client.api.v2010.accounts(account.accountSid).calls);
    } catch (error) {
      if (error instanceof twilio.RestException && error.code === NOT_FOUND) return null;
      throw new ProviderUnreachable(`Twilio did not give ${what}: ${describe(error)}`, { accountOnly: refusedAccount(error) });
    }
  }
}

/**
 * Twilio answered, refusing the request (a 4xx, not a 5xx): the account's trouble, not Twilio's. A
 * 429 (20429) is too: Twilio limits each account's concurrent API requests, so one account busy
 * hanging up an office's calls holds back nobody else's.
 */
function refusedAccount(error: unknown): boolean {
  return error instanceof twilio.RestException && error.status >= 400 && error.status < 500;
}

/** A call resource as the record its final callback would carry; null for a status this driver does not know (Twilio added one), which tells nothing. */
function record(call: CallInstance): ProviderCallRecord | null {
  if (!STATUSES.has(call.status)) return null;
  const status = call.status as ProviderCallStatus;
  // Twilio leaves end_time empty for a call that was not answered; its last update is when it ended.
  const endedAt = FINAL_CALL_STATUSES.has(status) ? (time(call.endTime) ?? time(call.dateUpdated)) : null;
  return {
    callSid: call.sid,
    parentCallSid: call.parentCallSid || null,
    status,
    endedAt,
    durationSeconds: typeof call.duration === 'string' && /^\d+$/.test(call.duration) ? Number(call.duration) : null,
  };
}

/** 0 for a leg in progress, 1 for one that ended after talk, 2 for the others: the order dialedLegRecord prefers them in. */
function carried(call: CallInstance): number {
  if (call.status === 'in-progress') return 0;
  return call.status === 'completed' && Number(call.duration) > 0 ? 1 : 2;
}

function time(date: unknown): number | null {
  return date instanceof Date && !Number.isNaN(date.getTime()) ? date.getTime() : null;
}

function describe(error: unknown): string {
  if (error instanceof twilio.RestException) return `HTTP ${error.status}${error.code === undefined ? '' : `, error ${error.code}`}: ${error.message}`;
  const { code, message } = error as { code?: unknown; message?: unknown };
  return typeof code === 'string' ? code : typeof message === 'string' ? message : 'unknown error';
}
