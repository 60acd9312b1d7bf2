/**
 * The simulated voice provider: a real in-process telephony simulator that behaves like Twilio
 * toward this service. It issues access tokens, receives "device" connects from simulated
 * engines, asks the voice webhook for dial instructions (signed, like Twilio), executes the TwiML
 * it gets back, and reports the dialed leg's progress through signed status callbacks, all on the
 * injectable clock. Legs live in the process that placed them: a restart drops them, as a carrier
 * outage would, and the server's reaper then ends the calls. Nodes of one deployment share their
 * simulators over the bus: a hangup, an answer or DTMF for a leg another node holds goes to that
 * node (a widget's command may reach any node; the leg is where the claim or the inbound call was).
 */
import { createHmac, randomBytes } from 'node:crypto';
import twilio from 'twilio';
import type { Bus, BusMessage } from '../../bus/index.js';
import type { Clock, Timer } from '../../clock.js';
import { PROVIDER_PATHS } from '../twiml.js';
import { signWebhook, type WebhookParams } from '../signature.js';
import {
  FINAL_CALL_STATUSES as FINAL,
  INBOUND_RING_SECONDS,
  ProviderUnavailable,
  ProviderUnreachable,
  type AccessToken,
  type HangupOutcome,
  type ProviderAccount,
  type ProviderCallRecord,
  type ProviderCallStatus,
  type VoiceProvider,
} from '../provider.js';
import { behaviourFor } from './behaviours.js';

/** Delivers a signed webhook to this service (in-process); answers the response body. */
export type WebhookDelivery = (path: string, params: WebhookParams, signature: string) => Promise<{ status: number; body: string }>;

interface Leg {
  sid: string;
  parentSid: string | null;
  account: ProviderAccount;
  to: string;
  direction: 'outbound' | 'inbound';
  status: ProviderCallStatus;
  statusCallback: string;
  answeredAt: number | null;
  timers: Timer[];
  digits: string;
  unreachableOnHangup: boolean;
  /** REST hangups asked for this leg, answered or not */
  hangupsAsked: number;
  /** an inbound leg's limit once answered (an outbound leg's comes with its TwiML) */
  timeLimitSeconds: number | null;
}

const newSid = () => `CA${randomBytes(16).toString('hex')}`;
type SimulatorOp = Extract<BusMessage, { type: 'simulator' }>;
/**
 * How long a hangup of a call no leg answers to is remembered: its leg may not be placed yet (the
 * voice webhook has answered, the leg is being placed) and must then not be.
 */
const EARLY_HANGUP_MS = 60_000;
const EARLY_HANGUPS_KEPT = 10_000;
/**
 * How long, and how many, ended legs' records are kept for callRecord: a day covers the longest
 * call (the platform's 4-hour cap) and the reaper's look at it afterwards.
 */
const ENDED_RECORD_MS = 24 * 60 * 60 * 1000;
const ENDED_RECORDS_KEPT = 10_000;

/** How dialedLegRecord finds an ended leg: by its parent, and by whom the parent dialed. */
const dialedKey = (parentSid: string, to?: string) => (to === undefined ? parentSid : `${parentSid} ${to}`);

/**
 * The key a simulated window's token is signed with: derived from the account's auth token, never
 * the token itself. Simulated windows are CI runs and demos, and an account may hold real Twilio
 * credentials: what they are handed must not be a MAC keyed with the secret that signs Twilio's
 * webhooks and calls its API (docs/twilio.md: it never leaves the service).
 */
export function simulatedTokenKey(account: ProviderAccount): string {
  return createHmac('sha256', account.authToken).update('c2c simulated voice token').digest('hex');
}

export class Simulator implements VoiceProvider {
  readonly name = 'simulated' as const;
  /**
   * Fault switches, for tests and demos of the error paths: tokens (false: the token service is
   * down); call records (`forgotten`: no record of any leg; `unreachable`: none can be read).
   */
  readonly faults: { tokens: boolean; records: 'kept' | 'forgotten' | 'unreachable' } = { tokens: true, records: 'kept' };
  #hangupFailures = 0;
  readonly #legs = new Map<string, Leg>();
  /** call sids hung up while no leg here answered to them: when, ms */
  readonly #earlyHangups = new Map<string, number>();
  /** ended legs' records and whom they dialed, oldest first, by the leg's sid */
  readonly #ended = new Map<string, { record: ProviderCallRecord; to: string }>();
  /** the newest ended leg a parent dialed (dialedKey), as Twilio lists a parent's children: the leg's sid in #ended */
  readonly #endedByParent = new Map<string, string>();
  #deliver: WebhookDelivery | undefined;
  #bus: Bus | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly publicBaseUrl: string,
  ) {}

  /** Wires the simulator to the app that receives its webhooks. */
  attach(deliver: WebhookDelivery): void {
    this.#deliver = deliver;
  }

  async accessToken(account: ProviderAccount, identity: string, ttlSeconds: number): Promise<AccessToken> {
    if (!this.faults.tokens) throw new ProviderUnavailable('simulated token service is down');
    const AccessTokenClass = twilio.jwt.AccessToken;
    const token = new AccessTokenClass(account.accountSid, `SK${account.accountSid.slice(2)}`, simulatedTokenKey(account), {
      identity,
      ttl: ttlSeconds,
      nbf: Math.floor(this.clock.now() / 1000),
    });
    token.addGrant(new AccessTokenClass.VoiceGrant({ incomingAllow: true, outgoingApplicationSid: `AP${account.accountSid.slice(2)}` }));
    return { token: token.toJwt(), expiresAt: this.clock.now() + ttlSeconds * 1000 };
  }

  /**
   * Joins the simulators of the deployment's other nodes: an operation on a leg this node does not
   * hold is published, and one published elsewhere is carried out here if the leg is here.
   */
  join(bus: Bus): () => void {
    this.#bus = bus;
    return bus.subscribe((message, { local }) => {
      if (local || message.type !== 'simulator') return;
      void this.#carryOut(message).catch(() => {});
    });
  }

  async hangup(_account: ProviderAccount, callSid: string): Promise<HangupOutcome> {
    const legs = this.#legsOf(callSid);
    if (legs.length === 0) {
      // a call this node ended already (its far end hung up), as Twilio's 21220
      if (this.#ended.has(callSid) || this.#endedByParent.has(dialedKey(callSid))) return 'ended-already';
      // remembered first: the leg may be this node's, being placed (it then is not)
      this.#hungUpEarly(callSid);
      // The leg may be another node's, which only the bus reaches: with the bus down the hangup
      // cannot be carried, and saying so (502 hangup_uncertain, retried) beats a false "ended".
      if (this.#bus && this.#bus.state() !== 'up') throw this.#unreachable('simulated provider unreachable: the bus to the other nodes is down');
      this.#relay({ type: 'simulator', op: 'hangup', callSid });
      return 'ended';
    }
    for (const leg of legs) leg.hangupsAsked += 1;
    if (legs.some((leg) => leg.unreachableOnHangup)) throw this.#unreachable('simulated provider unreachable');
    for (const leg of legs) await this.#end(leg, leg.answeredAt === null ? 'canceled' : 'completed');
    return 'ended';
  }

  /**
   * The record of a leg this node holds (by its own sid or its parent's) or ended (by its own sid,
   * which the service binds at the leg's first callback). A leg another node of the deployment
   * placed is not known here: null, as for a leg the simulator forgot.
   */
  async callRecord(_account: ProviderAccount, callSid: string): Promise<ProviderCallRecord | null> {
    if (!this.#recordsKept()) return null;
    const leg = this.#find(callSid);
    if (leg) return { callSid: leg.sid, parentCallSid: leg.parentSid, status: leg.status, endedAt: null, durationSeconds: null };
    return this.#ended.get(callSid)?.record ?? null;
  }

  /** The leg a parent this node placed dialed: held, or ended (the newest, kept as above). */
  async dialedLegRecord(_account: ProviderAccount, parentCallSid: string, to?: string): Promise<ProviderCallRecord | null> {
    if (!this.#recordsKept()) return null;
    const leg = [...this.#legs.values()].find((held) => held.parentSid === parentCallSid && (to === undefined || held.to === to));
    if (leg) return { callSid: leg.sid, parentCallSid, status: leg.status, endedAt: null, durationSeconds: null };
    const ended = this.#endedByParent.get(dialedKey(parentCallSid, to));
    return ended === undefined ? null : (this.#ended.get(ended)?.record ?? null);
  }

  get hangupFailures(): number {
    return this.#hangupFailures;
  }

  /** The records' fault switch: false when they are forgotten; throws when they cannot be read. */
  #recordsKept(): boolean {
    if (this.faults.records === 'unreachable') throw new ProviderUnreachable('simulated call records are unreachable');
    return this.faults.records === 'kept';
  }

  #unreachable(message: string): ProviderUnreachable {
    this.#hangupFailures += 1;
    return new ProviderUnreachable(message);
  }

  /**
   * What the voice SDK's connect() does for a simulated engine: the provider calls the voice
   * webhook with the connect params, then dials what the TwiML says.
   */
  async connect(account: ProviderAccount, identity: string, params: WebhookParams): Promise<string> {
    const parentSid = newSid();
    const response = await this.#post(account, PROVIDER_PATHS.voice, {
      CallSid: parentSid,
      AccountSid: account.accountSid,
      From: `client:${identity}`,
      Direction: 'inbound',
      CallStatus: 'ringing',
      ...params,
    });
    const dial = parseDial(response.body);
    if (response.status !== 200 || !dial) return parentSid;
    // Hung up while the webhook answered (on this node or another): nothing is dialed.
    if (this.#earlyHangups.delete(parentSid)) return parentSid;
    const behaviour = behaviourFor(dial.number);
    const leg: Leg = {
      sid: newSid(),
      parentSid,
      account,
      to: dial.number,
      direction: 'outbound',
      status: 'initiated',
      statusCallback: dial.statusCallback,
      answeredAt: null,
      timers: [],
      digits: '',
      unreachableOnHangup: behaviour.unreachableOnHangup,
      hangupsAsked: 0,
      timeLimitSeconds: null,
    };
    this.#legs.set(leg.sid, leg);
    const at = (seconds: number, fn: () => Promise<void>) => leg.timers.push(this.clock.after(seconds * 1000, fn));
    if (behaviour.failAt) {
      const { status } = behaviour.failAt;
      if (behaviour.failAt.at === 0) await this.#end(leg, status);
      else at(behaviour.failAt.at, () => this.#end(leg, status));
    }
    if (behaviour.ringAt !== null) at(behaviour.ringAt, () => this.#report(leg, 'ringing'));
    if (behaviour.answerAt !== null) {
      at(behaviour.answerAt, async () => {
        await this.#answer(leg);
        const limit = dial.timeLimit;
        const farEnd = behaviour.farEndHangupAfter;
        const endAfter = farEnd !== null ? Math.min(farEnd, limit) : limit;
        // ended while its answer was reported: a timer would only hold the leg for hours
        if (!FINAL.has(leg.status)) leg.timers.push(this.clock.after(endAfter * 1000, () => this.#end(leg, 'completed')));
      });
    }
    return parentSid;
  }

  /**
   * An inbound call ringing the client `identity`; progress is reported to statusCallback. Once
   * answered, it ends by itself `timeLimitSeconds` later (Twilio's `<Dial><Client timeLimit>`).
   */
  async ringClient(account: ProviderAccount, statusCallback: string, from: string | null, timeLimitSeconds: number): Promise<string> {
    const leg: Leg = {
      sid: newSid(),
      parentSid: null,
      account,
      to: from ?? 'anonymous',
      direction: 'inbound',
      status: 'ringing',
      statusCallback,
      answeredAt: null,
      timers: [],
      digits: '',
      unreachableOnHangup: false,
      hangupsAsked: 0,
      timeLimitSeconds,
    };
    this.#legs.set(leg.sid, leg);
    leg.timers.push(this.clock.after(INBOUND_RING_SECONDS * 1000, () => this.#end(leg, 'no-answer')));
    return leg.sid;
  }

  /** The simulated device accepted an incoming call. */
  async answer(callSid: string): Promise<boolean> {
    const leg = this.#legs.get(callSid);
    if (!leg) this.#relay({ type: 'simulator', op: 'answer', callSid });
    if (!leg || leg.status !== 'ringing') return false;
    for (const timer of leg.timers.splice(0)) timer.cancel();
    await this.#answer(leg);
    if (leg.timeLimitSeconds !== null && !FINAL.has(leg.status)) leg.timers.push(this.clock.after(leg.timeLimitSeconds * 1000, () => this.#end(leg, 'completed')));
    return true;
  }

  /** The simulated device declined an incoming call (reported like Twilio: busy). */
  async reject(callSid: string): Promise<boolean> {
    const leg = this.#legs.get(callSid);
    if (!leg || FINAL.has(leg.status)) return false;
    await this.#end(leg, 'busy');
    return true;
  }

  /** DTMF from the simulated device, heard by the far end of the call. */
  sendDigits(callSid: string, digits: string): boolean {
    const leg = this.#find(callSid);
    if (!leg) this.#relay({ type: 'simulator', op: 'digits', callSid, digits });
    if (!leg || leg.status !== 'in-progress') return false;
    leg.digits += digits;
    return true;
  }

  /** How many times the REST hangup of this call was asked for, answered or not (tests, diagnostics). */
  hangupsAsked(callSid: string): number {
    return this.#find(callSid)?.hangupsAsked ?? 0;
  }

  /** What the far end of a call heard as DTMF (tests, demos). */
  digitsHeard(callSid: string): string {
    return this.#find(callSid)?.digits ?? '';
  }

  /** Legs not yet ended, for diagnostics. */
  liveLegs(): number {
    return [...this.#legs.values()].filter((leg) => !FINAL.has(leg.status)).length;
  }

  #legsOf(callSid: string): Leg[] {
    return [...this.#legs.values()].filter((leg) => leg.sid === callSid || leg.parentSid === callSid);
  }

  #relay(message: SimulatorOp): void {
    this.#bus?.publish(message);
  }

  /** Another node's operation: carried out if the leg is here (a hangup is remembered if not). */
  async #carryOut(message: SimulatorOp): Promise<void> {
    if (message.op === 'hangup') {
      const legs = this.#legsOf(message.callSid);
      if (legs.length === 0) return this.#hungUpEarly(message.callSid);
      for (const leg of legs) {
        leg.hangupsAsked += 1;
        if (!leg.unreachableOnHangup) await this.#end(leg, leg.answeredAt === null ? 'canceled' : 'completed');
      }
    } else if (this.#find(message.callSid)) {
      if (message.op === 'answer') await this.answer(message.callSid);
      else if (message.digits) this.sendDigits(message.callSid, message.digits);
    }
  }

  #hungUpEarly(callSid: string): void {
    const now = this.clock.now();
    for (const [sid, at] of this.#earlyHangups) {
      if (at > now - EARLY_HANGUP_MS && this.#earlyHangups.size < EARLY_HANGUPS_KEPT) break;
      this.#earlyHangups.delete(sid);
    }
    this.#earlyHangups.set(callSid, now);
  }

  #keepEnded(record: ProviderCallRecord, to: string): void {
    for (const [sid, kept] of this.#ended) {
      if (kept.record.endedAt! > record.endedAt! - ENDED_RECORD_MS && this.#ended.size < ENDED_RECORDS_KEPT) break;
      this.#ended.delete(sid);
      const parent = kept.record.parentCallSid;
      if (parent === null) continue;
      for (const key of [dialedKey(parent), dialedKey(parent, kept.to)]) if (this.#endedByParent.get(key) === sid) this.#endedByParent.delete(key);
    }
    this.#ended.set(record.callSid, { record, to });
    if (record.parentCallSid === null) return;
    this.#endedByParent.set(dialedKey(record.parentCallSid), record.callSid);
    this.#endedByParent.set(dialedKey(record.parentCallSid, to), record.callSid);
  }

  #find(callSid: string): Leg | undefined {
    return this.#legs.get(callSid) ?? [...this.#legs.values()].find((leg) => leg.parentSid === callSid);
  }

  async #answer(leg: Leg): Promise<void> {
    leg.answeredAt = this.clock.now();
    await this.#report(leg, 'in-progress');
  }

  async #end(leg: Leg, status: ProviderCallStatus): Promise<void> {
    if (FINAL.has(leg.status)) return;
    for (const timer of leg.timers.splice(0)) timer.cancel();
    await this.#report(leg, status);
  }

  async #report(leg: Leg, status: ProviderCallStatus): Promise<void> {
    if (FINAL.has(leg.status)) return;
    leg.status = status;
    const now = this.clock.now();
    const durationSeconds = status === 'completed' && leg.answeredAt !== null ? Math.max(0, Math.round((now - leg.answeredAt) / 1000)) : null;
    if (FINAL.has(status)) {
      this.#legs.delete(leg.sid);
      this.#keepEnded({ callSid: leg.sid, parentCallSid: leg.parentSid, status, endedAt: now, durationSeconds }, leg.to);
    }
    const url = new URL(leg.statusCallback);
    const params: WebhookParams = {
      CallSid: leg.sid,
      AccountSid: leg.account.accountSid,
      CallStatus: status,
      Direction: leg.direction === 'outbound' ? 'outbound-dial' : 'inbound',
      To: leg.to,
      Timestamp: new Date(now).toUTCString(),
    };
    if (leg.parentSid) params.ParentCallSid = leg.parentSid;
    if (durationSeconds !== null) params.CallDuration = String(durationSeconds);
    await this.#post(leg.account, url.pathname + url.search, params);
  }

  async #post(account: ProviderAccount, pathWithQuery: string, params: WebhookParams) {
    if (!this.#deliver) throw new Error('simulator is not attached to an app');
    const signature = signWebhook(account.authToken, this.publicBaseUrl + pathWithQuery, params);
    return this.#deliver(pathWithQuery, params, signature);
  }
}

/** Reads the <Dial> our voice webhook answers with (TwiML from dialTwiml). */
function parseDial(twiml: string): { number: string; timeLimit: number; statusCallback: string } | null {
  const dial = /<Dial\b([^>]*)>\s*<Number\b([^>]*)>([^<]+)<\/Number>/.exec(twiml);
  if (!dial) return null;
  const attribute = (attributes: string, name: string) => new RegExp(`${name}="([^"]*)"`).exec(attributes)?.[1];
  const unescape = (text: string) => text.replaceAll('&amp;', '&').replaceAll('&quot;', '"').replaceAll('&lt;', '<').replaceAll('&gt;', '>');
  return {
    number: unescape(dial[3]!.trim()),
    timeLimit: Number(attribute(dial[1]!, 'timeLimit') ?? 14400),
    statusCallback: unescape(attribute(dial[2]!, 'statusCallback') ?? ''),
  };
}
