/**
 * The call window's engine with every outside piece scripted (fetch, socket, voice driver,
 * microphone) and fake timers, to reach each timing corner: exactly-once commands over push +
 * heartbeat, heartbeat periods, claims, final socket ends, the microphone report, hang-up and
 * unload. engine-live.test.ts runs the same engine against the real service.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { EngineWork, SocketEnd } from '../../shared/events.js';
import { z, type ZodType } from 'zod';
import type { EngineCommand, HeartbeatRequest, HeartbeatResponse } from '../../shared/schemas/engine-api.js';
import {
  Claimed,
  ClaimRequest,
  Closed,
  CloseRequest,
  EngineAnswerRequest,
  EngineAnswerResponse,
  EngineHangupRequest,
  EngineHangupResponse,
  HeartbeatRequest as HeartbeatRequestSchema,
  HeartbeatResponse as HeartbeatResponseSchema,
  optionalBody,
  VoiceToken,
} from '../../shared/schemas/engine-api.js';
import type { Call } from '../../shared/types.js';
import { ApiError, EngineApi, REQUEST_TIMEOUT_MS, type Paired } from '../../window/src/api.js';
import { SimulatedDriver } from '../../window/src/drivers/simulated.js';
import type { DriverEvent } from '../../window/src/drivers/types.js';
import { Engine, LEG_LOST_GRACE_MS, type EngineSocketLike } from '../../window/src/engine.js';
import { NUDGE_MIN_MS } from '../../shared/events.js';
import { MESSAGES, useLanguage } from '../../window/src/messages.js';
import type { MicState } from '../../window/src/mic.js';
import { STORAGE_KEY } from '../../window/src/session.js';
import type { SocketHandlers } from '../../window/src/socket.js';
import { TimerTicker } from '../../window/src/ticker.js';
import { VOICE_RETRY_MS } from '../../window/src/voice.js';
import { CLAIM_RETRY_MS } from '../../window/src/dialer.js';

const BASE = 'http://127.0.0.1:8080/api/v1/click2call';
const SERVER_NOW_S = 1_767_261_600;

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(SERVER_NOW_S * 1000);
});
/** every scripted server of the test: none may have seen, or given, what the contract does not allow */
const servers: FakeServer[] = [];
afterEach(() => {
  vi.useRealTimers();
  const broken = servers.splice(0).flatMap((server) => server.outsideContract);
  expect(broken).toEqual([]);
});

const paired = (controls: Array<'mute' | 'dtmf'> = ['mute', 'dtmf']): Paired => ({
  ok: true,
  engine_token: 'c2ce_token',
  engine: { id: 'eng_1', state: 'enabling', live: true, available: true, mic_ready: false, busy: false, muted: false, simulated: true, last_seen_ago: 0, version: 1, client: 'window' },
  integration_id: 'c2c_demo',
  integration_name: 'Demo CRM',
  agent: { name: 'Ana Agent', identifier: 'ana@example.com', type: 'email', department: null },
  policy: { outbound: true, inbound: true, number_visibility: 'show', controls, widget: { position: 'bottom-right', language: 'en', window_mode: 'popup' }, max_call_seconds: 3600 },
  voice_provider: 'simulated',
  heartbeat_ms: 15_000,
  heartbeat_fallback_ms: 3000,
  realtime: { url: 'http://127.0.0.1:8081', path: '/socket.io', available: true },
});

const call = (status: Call['status'], extra: Partial<Call> = {}): Call => ({
  request_id: 'ci_1',
  call_id: 'ci_1',
  direction: 'outbound',
  status,
  error: null,
  display: { name: 'Jo Bloggs', company: 'Bloggs Ltd', number: '+44••••••0123', contact_reference: null, department: null },
  answered_at: null,
  ended_at: null,
  duration: 0,
  expires_at: SERVER_NOW_S + 60,
  server_time: SERVER_NOW_S,
  orphaned: false,
  ...extra,
});

const command = (command_id: number, kind: EngineCommand['kind'], digits: string | null = null): EngineCommand => ({ command_id, kind, call_id: 'ci_1', digits, available: null, ref: null });

/** What the service takes and answers on each engine route (shared/schemas/engine-api.ts). */
const CONTRACT: Record<string, { request: ZodType; response: ZodType }> = {
  '/engine/heartbeat': { request: HeartbeatRequestSchema, response: HeartbeatResponseSchema },
  '/engine/voice-token': { request: z.undefined(), response: VoiceToken },
  '/engine/claim': { request: ClaimRequest, response: Claimed },
  '/engine/hangup': { request: optionalBody(EngineHangupRequest), response: EngineHangupResponse },
  '/engine/answer': { request: EngineAnswerRequest, response: EngineAnswerResponse },
  '/engine/close': { request: optionalBody(CloseRequest), response: Closed },
};

/** Offers the window a dial request with the next heartbeat answer; its claim wins and the server has the call `claimed`. */
function offerClaim(server: FakeServer, id: string): void {
  const claimed = call('claimed', { call_id: id, request_id: id });
  server.claims[id] = () => {
    server.current = claimed;
    return { status: 200, body: { ok: true, call: claimed, connect: { params: { To: id, Biz: 'acc_1', CallerId: '+12025550100' } } } };
  };
  server.queue.push({ dial_requests: [{ request_id: id, display: claimed.display, expires_at: SERVER_NOW_S + 60 }] });
}

/** A scripted server: heartbeat answers, claims, hangups; every request is recorded. */
class FakeServer {
  readonly requests: Array<{ path: string; body: any; headers: Record<string, string>; keepalive: boolean; signal?: AbortSignal | null }> = [];
  queue: Array<Partial<HeartbeatResponse>> = [];
  current: Call | null = null;
  /** the engine heartbeat answers carry (default: the paired one) */
  engine: HeartbeatResponse['engine'] | null = null;
  claims: Record<string, () => { status: number; body: unknown }> = {};
  hangup: () => { status: number; body: unknown } = () => ({ status: 200, body: { ok: true, call: call('completed', { ended_at: SERVER_NOW_S, duration: 12 }) } });
  heartbeatStatus = 200;
  /** seconds, for a 429 heartbeat answer's Retry-After */
  heartbeatRetryAfter = 0;
  voiceTtlS = 3600;
  /** voice tokens answered 503 provider_unavailable */
  voiceDown = false;
  /** every answer this long after its request (a real round trip) */
  latencyMs = 0;
  /** hang-up answers this long after their request (instead of latencyMs) */
  hangupLatencyMs: number | null = null;
  /** the device is a real one: /engine/answer leaves the call `incoming`, for the provider's report to connect */
  answerByProvider = false;
  /** how many heartbeats from now are never answered (their abort ignored: a proxy holding the connection) */
  hangHeartbeats = 0;

  /** a node of the release before `registered` and `inbound`: it answers without `inbound`, and refuses a report naming `registered` */
  earlierRelease = false;
  /** requests and answers outside the engine API's schemas (checked after each test) */
  readonly outsideContract: string[] = [];

  constructor() {
    servers.push(this);
  }

  answer(extra: Partial<HeartbeatResponse> = {}): HeartbeatResponse {
    const inbound = this.earlierRelease ? {} : { inbound: true };
    return { ok: true, engine: this.engine ?? paired().engine, commands: [], dial_requests: [], call: this.current, heartbeat_ms: 15_000, server_time: Math.floor(Date.now() / 1000), ...inbound, ...extra };
  }

  heartbeats(): HeartbeatRequest[] {
    return this.requests.filter((r) => r.path === '/engine/heartbeat').map((r) => r.body);
  }

  /**
   * The service's answer, as its schemas allow it, to a request as its schemas take it: the window
   * is checked against the contract, not against this stand-in's idea of it.
   */
  respond(path: string, body: any): { status: number; body: unknown; headers?: Record<string, string> } {
    const contract = CONTRACT[path];
    const sent = contract?.request.safeParse(body);
    if (sent && !sent.success && !this.earlierRelease) this.outsideContract.push(`the window sent ${path} a body the service refuses: ${sent.error.message}`);
    const answer = this.respondAsScripted(path, body);
    const given = answer.status === 200 ? contract?.response.safeParse(answer.body) : undefined;
    if (given && !given.success && !this.earlierRelease) this.outsideContract.push(`the stand-in answered ${path} what the service never would: ${given.error.message}`);
    return answer;
  }

  respondAsScripted(path: string, body: any): { status: number; body: unknown; headers?: Record<string, string> } {
    if (path === '/engine/heartbeat') {
      if (this.heartbeatStatus === 429) {
        return { status: 429, body: { ok: false, error: 'rate_limited', message: 'Too many requests.' }, headers: { 'retry-after': String(this.heartbeatRetryAfter) } };
      }
      if (this.heartbeatStatus !== 200) return { status: this.heartbeatStatus, body: { ok: false, error: 'unauthorized', message: 'This call window was closed or replaced by a newer one.' } };
      if (this.earlierRelease && 'registered' in body) return { status: 422, body: { ok: false, error: 'invalid_request', message: 'registered: Unrecognized key' } };
      return { status: 200, body: this.answer(this.queue.shift()) };
    }
    if (path === '/engine/voice-token' && this.voiceDown) return { status: 503, body: { ok: false, error: 'provider_unavailable', message: 'The voice provider cannot issue a token right now.' } };
    if (path === '/engine/voice-token') return { status: 200, body: { ok: true, provider: 'simulated', token: 'sim-token', identity: 'c2c_eng_1', expires_at: Math.floor(Date.now() / 1000) + this.voiceTtlS } };
    if (path === '/engine/claim') return this.claims[body.request_id]?.() ?? { status: 404, body: { ok: false, error: 'not_found', message: 'Not found.' } };
    if (path === '/engine/hangup') return this.hangup();
    if (path === '/engine/answer') {
      // as the service: the call ringing here is answered (a simulated device's by the service itself)
      const ringing = this.current;
      if (!ringing || ringing.call_id !== body.call_id || ringing.status !== 'incoming') return { status: 409, body: { ok: false, error: 'invalid_state', message: 'No incoming call of this window rings with this call_id.' } };
      if (!this.answerByProvider) this.current = { ...ringing, status: 'connected', answered_at: SERVER_NOW_S };
      return { status: 200, body: { ok: true, call: this.current } };
    }
    if (path === '/engine/close') return { status: 200, body: { ok: true, closed: true } };
    return { status: 404, body: { ok: false, error: 'not_found', message: 'Not found.' } };
  }

  fetch = vi.fn(async (url: string | URL | Request, init?: RequestInit) => {
    const path = String(url).slice(BASE.length);
    const body = init?.body ? JSON.parse(String(init.body)) : undefined;
    this.requests.push({ path, body, headers: (init?.headers ?? {}) as Record<string, string>, keepalive: init?.keepalive === true, signal: init?.signal });
    if (path === '/engine/heartbeat' && this.hangHeartbeats > 0) {
      this.hangHeartbeats -= 1;
      return new Promise<Response>(() => {});
    }
    const result = this.respond(path, body);
    const latency = path === '/engine/hangup' ? (this.hangupLatencyMs ?? this.latencyMs) : this.latencyMs;
    if (latency > 0) await new Promise((resolve) => setTimeout(resolve, latency));
    return new Response(JSON.stringify(result.body), { status: result.status, headers: result.headers });
  });
}

class FakeSocket implements EngineSocketLike {
  connected = false;
  handlers!: SocketHandlers;
  readonly reports: HeartbeatRequest[] = [];
  ack = vi.fn(async (_acks: HeartbeatRequest['acks']) => false);
  stop = vi.fn(() => {
    this.connected = false;
  });
  constructor(readonly server: FakeServer) {}
  async heartbeat(report: HeartbeatRequest): Promise<HeartbeatResponse> {
    this.reports.push(report);
    return this.server.answer(this.server.queue.shift());
  }
  up() {
    this.connected = true;
    this.handlers.onUp();
  }
  down() {
    this.connected = false;
    this.handlers.onDown();
  }
  work(work: Partial<EngineWork>) {
    this.handlers.onWork({ commands: [], dial_requests: [], ...work });
  }
  end(end: SocketEnd) {
    this.connected = false;
    this.handlers.onFinal(end);
  }
}

function storage(): Storage {
  const map = new Map<string, string>([[STORAGE_KEY, '{"stored":true}']]);
  return { length: 0, clear: () => map.clear(), key: () => null, getItem: (k) => map.get(k) ?? null, setItem: (k, v) => void map.set(k, v), removeItem: (k) => void map.delete(k) };
}

async function engine(options: { mic?: MicState; askMic?: () => Promise<MicState>; controls?: Array<'mute' | 'dtmf'>; realtime?: boolean; voiceTtlS?: number; driver?: SimulatedDriver; loadDriver?: () => Promise<SimulatedDriver> } = {}) {
  const server = new FakeServer();
  if (options.voiceTtlS) server.voiceTtlS = options.voiceTtlS;
  const socket = new FakeSocket(server);
  const driver = options.driver ?? new SimulatedDriver();
  const spies = { updateToken: vi.spyOn(driver, 'updateToken'), accept: vi.spyOn(driver, 'accept'), mute: vi.spyOn(driver, 'mute'), sendDigits: vi.spyOn(driver, 'sendDigits'), connect: vi.spyOn(driver, 'connect'), disconnect: vi.spyOn(driver, 'disconnect') };
  const store = storage();
  const focus = vi.fn();
  const tellWidget = vi.fn();
  const api = new EngineApi(BASE, server.fetch);
  const p = paired(options.controls);
  if (options.realtime === false) p.realtime.available = false;
  const instance = new Engine(p, {
    api,
    storage: store,
    loadDriver: options.loadDriver ?? (async () => driver),
    ticker: new TimerTicker(),
    connectSocket: (_paired, handlers) => {
      socket.handlers = handlers;
      return socket;
    },
    askMic: options.askMic ?? (async () => options.mic ?? 'ready'),
    focus,
    now: () => Date.now(),
    tellWidget,
  });
  await instance.start(null);
  await vi.advanceTimersByTimeAsync(0);
  return { instance, server, socket, driver, spies, store, focus, tellWidget };
}

/** A simulated device whose events the test sends (the simulated driver emits none by itself). */
function eventfulDevice() {
  const device = new SimulatedDriver();
  const listeners: Array<(event: DriverEvent) => void> = [];
  vi.spyOn(device, 'on').mockImplementation((listener) => {
    listeners.push(listener);
    return () => {};
  });
  return { device, emit: (event: DriverEvent) => listeners.forEach((listener) => listener(event)) };
}

describe('Engine', () => {
  it('takes a heartbeat the gateway could not (its store out of reach: 503) over REST, where another node answers', async () => {
    const { socket, server, instance } = await engine();
    socket.up();
    socket.heartbeat = vi.fn(async () => {
      throw new ApiError(503, 'service_unavailable', 'The database is not answering; retry shortly.');
    });
    const rest = server.heartbeats().length;
    await vi.advanceTimersByTimeAsync(15_000);
    expect(socket.heartbeat).toHaveBeenCalled();
    expect(server.heartbeats().length).toBeGreaterThan(rest);
    expect(instance.model().message).toBeNull(); // not "reconnecting": the service heard it
    // a refusal over the socket stays the service's answer: nothing is sent again over REST
    socket.heartbeat = vi.fn(async () => {
      throw new ApiError(429, 'rate_limited', 'Too many requests.', 5000);
    });
    const afterRefusal = server.heartbeats().length;
    await vi.advanceTimersByTimeAsync(15_000);
    expect(socket.heartbeat).toHaveBeenCalled();
    expect(server.heartbeats().length).toBe(afterRefusal);
  });

  it("heartbeats at once on a widget's nudge while its socket is down, at most once a second, and ignores nudges while the socket carries pushes", async () => {
    const { instance, server, socket } = await engine();
    socket.down();
    await vi.advanceTimersByTimeAsync(0);
    const count = () => server.heartbeats().length;
    let before = count();
    instance.nudge();
    await vi.advanceTimersByTimeAsync(0);
    expect(count()).toBe(before + 1);
    // a flood of nudges (any page holding the window can send them) costs one heartbeat a second:
    // those too soon are kept for the end of the second, once
    before = count();
    for (let i = 0; i < 50; i += 1) instance.nudge();
    await vi.advanceTimersByTimeAsync(0);
    expect(count()).toBe(before);
    await vi.advanceTimersByTimeAsync(NUDGE_MIN_MS);
    expect(count()).toBe(before + 1);
    await vi.advanceTimersByTimeAsync(NUDGE_MIN_MS);
    before = count();
    instance.nudge();
    await vi.advanceTimersByTimeAsync(0);
    expect(count()).toBe(before + 1);
    socket.up();
    await vi.advanceTimersByTimeAsync(NUDGE_MIN_MS);
    const reports = socket.reports.length;
    before = count();
    instance.nudge();
    await vi.advanceTimersByTimeAsync(0);
    expect([count(), socket.reports.length]).toEqual([before, reports]);
  });

  it('tells the widget that opened it when its engine or call changed, once per change', async () => {
    const { server, tellWidget, socket } = await engine();
    socket.down();
    const told = tellWidget.mock.calls.length;
    expect(told).toBeGreaterThan(0); // the first answer
    await vi.advanceTimersByTimeAsync(3000);
    expect(tellWidget).toHaveBeenCalledTimes(told); // nothing changed
    server.engine = { ...paired().engine, version: 9, muted: true };
    await vi.advanceTimersByTimeAsync(6000);
    expect(tellWidget).toHaveBeenCalledTimes(told + 1);
    server.current = call('ringing');
    await vi.advanceTimersByTimeAsync(6000);
    expect(tellWidget).toHaveBeenCalledTimes(told + 2);
  });

  it('fetches a voice token after pairing and reports ready with the microphone', async () => {
    const { server, instance } = await engine();
    expect(server.requests[0]!.path).toBe('/engine/heartbeat');
    expect(server.requests.some((r) => r.path === '/engine/voice-token' && r.headers.authorization === 'Bearer c2ce_token')).toBe(true);
    expect(server.heartbeats().at(-1)).toEqual({ state: 'ready', mic_ready: true, busy: false, muted: false, call_id: null, acks: [], registered: true });
    expect(instance.model()).toMatchObject({ state: 'ready', agent: 'Ana Agent', message: null });
  });

  it('fetches a fresh voice token five minutes before the current one expires and hands it to the driver', async () => {
    const { server, spies } = await engine({ voiceTtlS: 600 });
    const tokens = () => server.requests.filter((r) => r.path === '/engine/voice-token').length;
    expect(tokens()).toBe(1);
    await vi.advanceTimersByTimeAsync(280_000);
    expect(tokens()).toBe(1);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(tokens()).toBe(2);
    expect(spies.updateToken).toHaveBeenCalledWith('sim-token');
  });

  it('asks again for a voice token the provider could not give at most every few seconds, not after every heartbeat', async () => {
    // the token held expires within the margin: every heartbeat tick would ask for another
    const { server } = await engine({ voiceTtlS: 60 });
    const tokens = () => server.requests.filter((r) => r.path === '/engine/voice-token').length;
    server.voiceDown = true;
    server.latencyMs = 20;
    const before = { tokens: tokens(), heartbeats: server.heartbeats().length };
    await vi.advanceTimersByTimeAsync(30_000);
    // each failed attempt is followed by a heartbeat; neither comes once per round trip (1,500 in 30 s)
    expect(tokens() - before.tokens).toBeGreaterThan(0);
    expect(tokens() - before.tokens).toBeLessThanOrEqual(30_000 / VOICE_RETRY_MS + 1);
    expect(server.heartbeats().length - before.heartbeats).toBeLessThanOrEqual(30_000 / VOICE_RETRY_MS + 30_000 / 3000 + 2);
  });

  it('refuses a mute or digits for another call than the one it holds (handed over again after a gap), and carries out those for its own', async () => {
    const { instance, server, socket, spies } = await engine();
    socket.up();
    server.current = call('connected', { call_id: 'ci_B', request_id: 'ci_B', answered_at: SERVER_NOW_S });
    socket.work({});
    await vi.advanceTimersByTimeAsync(0);
    expect(instance.onCall).toBe(true);
    socket.ack.mockResolvedValue(true);
    socket.work({ commands: [{ ...command(7, 'mute'), call_id: 'ci_OLD' }, { ...command(8, 'dtmf', '1234'), call_id: 'ci_OLD' }] });
    await vi.advanceTimersByTimeAsync(0);
    expect(spies.mute).not.toHaveBeenCalled();
    expect(spies.sendDigits).not.toHaveBeenCalled();
    const refused = socket.ack.mock.calls.flatMap(([acks]) => acks ?? []);
    expect(refused).toEqual(expect.arrayContaining([expect.objectContaining({ command_id: 7, result: 'failed' }), expect.objectContaining({ command_id: 8, result: 'failed' })]));
    socket.work({ commands: [{ ...command(9, 'mute'), call_id: 'ci_B' }] });
    await vi.advanceTimersByTimeAsync(0);
    expect(spies.mute).toHaveBeenCalledWith(true);
  });

  it("answers the incoming call ringing here from its own Answer button: the device takes it, the service is told, the call shows connected", async () => {
    const { device, emit } = eventfulDevice();
    const { instance, server, socket, spies } = await engine({ driver: device });
    socket.up();
    await vi.advanceTimersByTimeAsync(0);
    server.current = call('incoming', { call_id: 'ci_IN', request_id: 'ci_IN', direction: 'inbound' });
    emit({ type: 'incoming', ref: 'ci_IN' });
    socket.work({});
    await vi.advanceTimersByTimeAsync(0);
    expect(instance.model().call).toMatchObject({ direction: 'inbound', status: 'incoming' });
    await instance.answer();
    expect(spies.accept).toHaveBeenCalledExactlyOnceWith('ci_IN');
    expect(server.requests.filter((r) => r.path === '/engine/answer').map((r) => r.body)).toEqual([{ call_id: 'ci_IN' }]);
    expect(instance.model()).toMatchObject({ state: 'call', answerBusy: false, call: { status: 'connected' } });
    // nothing rings any more: a second press does nothing
    await instance.answer();
    expect(spies.accept).toHaveBeenCalledTimes(1);
  });

  it("offers no second Answer once a real device took the call, though the service still has it incoming until the provider's report; the widget's answer for it is done, not refused", async () => {
    const { device, emit } = eventfulDevice();
    const { instance, server, socket, spies } = await engine({ driver: device });
    server.answerByProvider = true;
    socket.up();
    socket.ack.mockResolvedValue(true);
    await vi.advanceTimersByTimeAsync(0);
    server.current = call('incoming', { call_id: 'ci_RT', request_id: 'ci_RT', direction: 'inbound' });
    emit({ type: 'incoming', ref: 'ci_RT' });
    socket.work({});
    await vi.advanceTimersByTimeAsync(0);
    expect(instance.model().answerable).toBe(true);
    await instance.answer();
    expect(instance.model()).toMatchObject({ answerable: false, message: null, call: { status: 'incoming' } });
    await instance.answer();
    expect(spies.accept).toHaveBeenCalledTimes(1);
    expect(server.requests.filter((r) => r.path === '/engine/answer')).toHaveLength(1);
    // the agent also pressed Answer in the widget: done, the device holds the call
    socket.work({ commands: [{ ...command(71, 'answer'), call_id: 'ci_RT' }] });
    await vi.advanceTimersByTimeAsync(0);
    expect(spies.accept).toHaveBeenCalledTimes(1);
    const acks = socket.ack.mock.calls.flatMap(([sent]) => sent ?? []);
    expect(acks).toContainEqual({ command_id: 71, result: 'done' });
  });

  it("takes an answer once when the window's Answer and the widget's come together while the device waits for the ring (either first)", async () => {
    for (const first of ['window', 'widget'] as const) {
      const { instance, server, socket, spies } = await engine();
      server.answerByProvider = true;
      socket.up();
      socket.ack.mockResolvedValue(true);
      await vi.advanceTimersByTimeAsync(0);
      server.current = call('incoming', { call_id: `ci_${first}`, request_id: `ci_${first}`, direction: 'inbound' });
      socket.work({});
      await vi.advanceTimersByTimeAsync(0);
      let rang!: () => void;
      spies.accept.mockImplementationOnce(() => new Promise<void>((resolve) => (rang = resolve)));
      const fromWidget = () => socket.work({ commands: [{ ...command(first === 'window' ? 81 : 82, 'answer'), call_id: `ci_${first}` }] });
      let pressed: Promise<void> | undefined;
      if (first === 'window') pressed = instance.answer();
      else fromWidget();
      await vi.advanceTimersByTimeAsync(0);
      if (first === 'window') fromWidget();
      else pressed = instance.answer();
      await vi.advanceTimersByTimeAsync(0);
      rang();
      await pressed;
      await vi.advanceTimersByTimeAsync(0);
      expect(spies.accept, first).toHaveBeenCalledTimes(1);
      const acks = socket.ack.mock.calls.flatMap(([sent]) => sent ?? []);
      expect(acks, first).toContainEqual({ command_id: first === 'window' ? 81 : 82, result: 'done' });
      expect(instance.model().message, first).toBeNull();
    }
  });

  it('says why an Answer failed (nothing rings on the device any more), and keeps the call as the service has it', async () => {
    const { instance, server, socket, spies } = await engine();
    socket.up();
    await vi.advanceTimersByTimeAsync(0);
    server.current = call('incoming', { call_id: 'ci_IN2', request_id: 'ci_IN2', direction: 'inbound' });
    socket.work({});
    await vi.advanceTimersByTimeAsync(0);
    spies.accept.mockRejectedValueOnce(new Error('No incoming call is ringing in this window.'));
    await instance.answer();
    expect(server.requests.filter((r) => r.path === '/engine/answer')).toHaveLength(0);
    expect(instance.model().message?.text).toContain('No incoming call is ringing');
    expect(instance.model().call).toMatchObject({ status: 'incoming' });
  });

  it('refuses a mute or digits for a call no longer up here (the next call does not start muted), and an answer for another call than the one ringing', async () => {
    const { instance, server, socket, spies } = await engine();
    socket.up();
    socket.ack.mockResolvedValue(true);
    await vi.advanceTimersByTimeAsync(0);
    expect(instance.onCall).toBe(false);
    socket.work({ commands: [{ ...command(31, 'mute'), call_id: 'ci_GONE' }, { ...command(32, 'dtmf', '5'), call_id: 'ci_GONE' }] });
    await vi.advanceTimersByTimeAsync(0);
    expect(spies.mute).not.toHaveBeenCalled();
    expect(spies.sendDigits).not.toHaveBeenCalled();
    const acks = () => socket.ack.mock.calls.flatMap(([sent]) => sent ?? []);
    expect(acks()).toEqual(expect.arrayContaining([
      { command_id: 31, result: 'failed', error: MESSAGES.callOver },
      { command_id: 32, result: 'failed', error: MESSAGES.callOver },
    ]));
    // the next call rings: a late answer meant for the one before is not carried out on it
    server.current = call('incoming', { call_id: 'ci_NEXT', request_id: 'ci_NEXT', direction: 'inbound' });
    socket.work({});
    await vi.advanceTimersByTimeAsync(0);
    socket.work({ commands: [{ ...command(33, 'answer'), call_id: 'ci_GONE' }] });
    await vi.advanceTimersByTimeAsync(0);
    expect(spies.accept).not.toHaveBeenCalled();
    expect(acks()).toContainEqual({ command_id: 33, result: 'failed', error: MESSAGES.otherCall });
    expect(socket.reports.at(-1)).toMatchObject({ muted: false });
  });

  it("forgets what rang on the device once the window let it go: an answer for the next call, before its ring, is carried out", async () => {
    const { device, emit } = eventfulDevice();
    const { instance, server, socket, spies } = await engine({ driver: device });
    socket.up();
    socket.ack.mockResolvedValue(true);
    await vi.advanceTimersByTimeAsync(0);
    server.current = call('incoming', { call_id: 'ci_A', request_id: 'ci_A', direction: 'inbound' });
    emit({ type: 'incoming', ref: 'ci_A' });
    socket.work({});
    await vi.advanceTimersByTimeAsync(0);
    // the agent hangs up the ringing call in the window: the server declines it, the device lets it go
    // (the driver tells nothing of a leg it was told to let go)
    server.hangup = () => ({ status: 200, body: { ok: true, call: call('rejected', { call_id: 'ci_A', request_id: 'ci_A', direction: 'inbound', ended_at: SERVER_NOW_S }) } });
    server.current = null;
    await instance.hangup();
    await vi.advanceTimersByTimeAsync(0);
    expect(instance.onCall).toBe(false);
    // the next caller: the widget's answer comes before Twilio's ring reaches the device
    socket.work({ commands: [{ ...command(51, 'answer'), call_id: 'ci_B' }] });
    await vi.advanceTimersByTimeAsync(0);
    expect(spies.accept).toHaveBeenCalledExactlyOnceWith('ci_B');
  });

  it.each(['decline', 'hangup'] as const)('forgets what rang once a %s command let it go: an answer for the next call, before its ring, is carried out', async (kind) => {
    const { device, emit } = eventfulDevice();
    const { socket, spies } = await engine({ driver: device });
    socket.up();
    socket.ack.mockResolvedValue(true);
    await vi.advanceTimersByTimeAsync(0);
    emit({ type: 'incoming', ref: 'ci_A' });
    socket.work({ commands: [{ ...command(61, kind), call_id: 'ci_A' }] });
    await vi.advanceTimersByTimeAsync(0);
    socket.work({ commands: [{ ...command(62, 'answer'), call_id: 'ci_B' }] });
    await vi.advanceTimersByTimeAsync(0);
    expect(spies.accept).toHaveBeenCalledExactlyOnceWith('ci_B');
  });

  it('refuses an answer for another call than the one the device says rings, before the window has heard of either', async () => {
    const { device, emit } = eventfulDevice();
    const { socket, spies } = await engine({ driver: device });
    socket.up();
    socket.ack.mockResolvedValue(true);
    await vi.advanceTimersByTimeAsync(0);
    emit({ type: 'incoming', ref: 'ci_NEXT' }); // the next caller rings on the device; no heartbeat described it yet
    socket.work({ commands: [{ ...command(41, 'answer'), call_id: 'ci_GONE' }] });
    await vi.advanceTimersByTimeAsync(0);
    expect(spies.accept).not.toHaveBeenCalled();
    const acks = () => socket.ack.mock.calls.flatMap(([sent]) => sent ?? []);
    expect(acks()).toContainEqual({ command_id: 41, result: 'failed', error: MESSAGES.otherCall });
    socket.work({ commands: [{ ...command(42, 'answer'), call_id: 'ci_NEXT' }] });
    await vi.advanceTimersByTimeAsync(0);
    expect(spies.accept).toHaveBeenCalledExactlyOnceWith('ci_NEXT'); // the driver is told which call, to refuse another ringing by then
  });

  it("lets the device's leg go when the server says the call is over before the device heard it ended", async () => {
    const { instance, server, socket, spies } = await engine();
    socket.up();
    server.current = call('connected', { answered_at: SERVER_NOW_S });
    socket.work({});
    await vi.advanceTimersByTimeAsync(0);
    expect(instance.onCall).toBe(true);
    expect(spies.disconnect).not.toHaveBeenCalled();
    server.current = call('completed', { answered_at: SERVER_NOW_S, ended_at: SERVER_NOW_S + 5, duration: 5 });
    socket.work({});
    await vi.advanceTimersByTimeAsync(0);
    expect(instance.onCall).toBe(false);
    expect(spies.disconnect).toHaveBeenCalledTimes(1);
  });

  it('reports enabling and shows a clear message when the microphone is denied', async () => {
    const { server, instance } = await engine({ mic: 'denied' });
    expect(server.heartbeats().at(-1)).toMatchObject({ state: 'enabling', mic_ready: false });
    expect(instance.model()).toMatchObject({ state: 'no_mic', message: { text: MESSAGES.micDenied, tone: 'error' }, retry: 'Try again' });
  });

  it('is not ready while no microphone is plugged in, says so, and asks again when one is', async () => {
    const askMic = vi.fn(async (): Promise<MicState> => 'ready');
    const { server, instance } = await engine({ askMic });
    expect(server.heartbeats().at(-1)).toMatchObject({ state: 'ready', mic_ready: true });
    instance.micDevices(true); // another device came or went: still one
    instance.micDevices(false);
    await vi.advanceTimersByTimeAsync(0);
    expect(server.heartbeats().at(-1)).toMatchObject({ state: 'enabling', mic_ready: false });
    expect(instance.model()).toMatchObject({ state: 'no_mic', message: { text: MESSAGES.micMissing, tone: 'error' } });
    expect(askMic).toHaveBeenCalledTimes(1);
    instance.micDevices(true);
    await vi.advanceTimersByTimeAsync(0);
    expect(askMic).toHaveBeenCalledTimes(2);
    expect(server.heartbeats().at(-1)).toMatchObject({ state: 'ready', mic_ready: true });
  });

  it('asks for the microphone again, not ready meanwhile, when its permission is reset; blocked, it says so', async () => {
    let answer!: (state: MicState) => void;
    const askMic = vi.fn(async (): Promise<MicState> => 'ready');
    const { server, instance } = await engine({ askMic });
    askMic.mockImplementation(() => new Promise<MicState>((resolve) => (answer = resolve)));
    instance.micPermission('prompt');
    await vi.advanceTimersByTimeAsync(0);
    expect(askMic).toHaveBeenCalledTimes(2);
    expect(instance.model()).toMatchObject({ message: { text: MESSAGES.micAsking } });
    // said at once, while the browser asks: no call rings here meanwhile
    expect(server.heartbeats().at(-1)).toMatchObject({ state: 'enabling', mic_ready: false });
    answer('ready');
    await vi.advanceTimersByTimeAsync(0);
    expect(server.heartbeats().at(-1)).toMatchObject({ state: 'ready', mic_ready: true });
    instance.micPermission('denied');
    await vi.advanceTimersByTimeAsync(0);
    expect(server.heartbeats().at(-1)).toMatchObject({ state: 'enabling', mic_ready: false });
    expect(instance.model()).toMatchObject({ state: 'no_mic', message: { text: MESSAGES.micDenied } });
  });

  it('carries out a command pushed twice once, acks both pushes on the socket, and carries the result to the next heartbeat', async () => {
    const { socket, spies, server } = await engine();
    server.current = call('connected', { answered_at: SERVER_NOW_S }); // the call the commands are for
    socket.up();
    await vi.advanceTimersByTimeAsync(0);
    const before = socket.reports.length;
    socket.work({ commands: [command(5, 'mute')] });
    socket.work({ commands: [command(5, 'mute')] });
    await vi.advanceTimersByTimeAsync(0);
    expect(spies.mute).toHaveBeenCalledTimes(1);
    expect(spies.mute).toHaveBeenCalledWith(true);
    expect(socket.ack).toHaveBeenCalledTimes(2);
    for (const [acks] of socket.ack.mock.calls) expect(acks).toEqual([{ command_id: 5, result: 'done' }]);
    // The socket acks were not confirmed: the heartbeats sent right after carry the result and the mute state.
    const next = socket.reports.slice(before);
    expect(next.filter((r) => r.acks.length > 0).map((r) => r.acks)).toEqual([[{ command_id: 5, result: 'done' }]]);
    expect(next.find((r) => r.acks.length > 0)).toMatchObject({ muted: true });
    // Delivered once more in a heartbeat answer: not carried out again, still acked; the socket did
    // not take that ack either, so a heartbeat carries it at once.
    server.queue.push({ commands: [command(5, 'mute')] });
    const beforeRedelivery = socket.reports.length;
    await vi.advanceTimersByTimeAsync(3_000); // on a call the window heartbeats every 3 s
    expect(spies.mute).toHaveBeenCalledTimes(1);
    expect(socket.ack).toHaveBeenCalledTimes(3);
    await vi.advanceTimersByTimeAsync(0);
    expect(socket.reports.length).toBe(beforeRedelivery + 2);
    expect(socket.reports.at(-1)!.acks).toEqual([{ command_id: 5, result: 'done' }]);
  });

  it('sends no heartbeat for a pushed focus or dtmf whose ack the socket took; it does for a mute, and for an empty push (a nudge)', async () => {
    const { socket, spies, focus, server } = await engine();
    server.current = call('connected', { answered_at: SERVER_NOW_S }); // the call the commands are for
    socket.ack.mockResolvedValue(true);
    socket.up();
    await vi.advanceTimersByTimeAsync(0);
    const before = socket.reports.length;
    socket.work({ commands: [command(21, 'focus')] });
    socket.work({ commands: [command(22, 'dtmf', '1')] });
    await vi.advanceTimersByTimeAsync(0);
    expect(socket.ack).toHaveBeenCalledTimes(2);
    expect(focus).toHaveBeenCalledTimes(1);
    expect(spies.sendDigits).toHaveBeenCalledWith('1');
    expect(socket.reports.length).toBe(before);
    // the mute state changed: reported at once
    socket.work({ commands: [command(23, 'mute')] });
    await vi.advanceTimersByTimeAsync(0);
    expect(socket.reports.length).toBeGreaterThan(before);
    expect(socket.reports.at(-1)).toMatchObject({ muted: true });
    // an empty push is the server's nudge (a call rings for this window): the window asks at once
    const afterMute = socket.reports.length;
    socket.work({});
    await vi.advanceTimersByTimeAsync(0);
    expect(socket.reports.length).toBe(afterMute + 1);
  });

  it('drops acks from the heartbeat once the socket ack is confirmed', async () => {
    const { socket } = await engine();
    socket.ack.mockResolvedValue(true);
    socket.up();
    await vi.advanceTimersByTimeAsync(0);
    socket.work({ commands: [command(9, 'focus')] });
    await vi.advanceTimersByTimeAsync(0);
    await vi.advanceTimersByTimeAsync(15_000);
    expect(socket.reports.at(-1)!.acks).toEqual([]);
  });

  it('carries out commands that arrive only in heartbeat answers (socket down) and reports them in the next heartbeat', async () => {
    const { server, spies, focus } = await engine({ realtime: false });
    server.current = call('incoming', { direction: 'inbound' }); // rings here, listed with the commands
    server.queue.push({ commands: [command(1, 'dtmf', '12#'), command(2, 'focus'), command(3, 'answer')] });
    const before = server.heartbeats().length;
    await vi.advanceTimersByTimeAsync(3000);
    expect(spies.sendDigits).toHaveBeenCalledWith('12#');
    expect(focus).toHaveBeenCalledTimes(1);
    expect(spies.accept).toHaveBeenCalledTimes(1);
    // The heartbeat right after the one that delivered them carries the results, and names the answered
    // call at once, before any answer described it.
    const [delivering, reporting] = server.heartbeats().slice(before);
    expect(delivering!.acks).toEqual([]);
    expect(reporting).toMatchObject({
      call_id: 'ci_1',
      acks: [
        { command_id: 1, result: 'done' },
        { command_id: 2, result: 'done' },
        { command_id: 3, result: 'done' },
      ],
    });
    // Confirmed by that heartbeat's 200: not carried again.
    await vi.advanceTimersByTimeAsync(3000);
    expect(server.heartbeats().at(-1)!.acks).toEqual([]);
  });

  it('acks a command the device cannot carry out as failed with its reason', async () => {
    const { server } = await engine({ realtime: false });
    server.current = call('connected', { answered_at: SERVER_NOW_S });
    server.queue.push({ commands: [command(4, 'dtmf', null)] });
    await vi.advanceTimersByTimeAsync(3000);
    expect(server.heartbeats().at(-1)!.acks).toEqual([{ command_id: 4, result: 'failed', error: 'A dtmf command needs digits.' }]);
    // in the window's language, which the widget shows after its own prefix
    useLanguage('fr');
    try {
      server.queue.push({ commands: [command(5, 'dtmf', null)] });
      await vi.advanceTimersByTimeAsync(3000);
      expect(server.heartbeats().at(-1)!.acks).toContainEqual({ command_id: 5, result: 'failed', error: 'Une commande dtmf demande des chiffres.' });
    } finally {
      useLanguage('en');
    }
  });

  it("says a voice driver's refusal in the window's language, not the driver's English (the Twilio driver is a bundle of its own)", async () => {
    const { server, spies } = await engine({ realtime: false });
    server.current = call('incoming', { direction: 'inbound' });
    await vi.advanceTimersByTimeAsync(3000);
    // as the Twilio bundle's own copy of DriverError throws it: an Error carrying its refusal
    const refusal = () => Object.assign(new Error('No incoming call is ringing in this window.'), { refusal: 'nothing_ringing' });
    spies.accept.mockRejectedValueOnce(refusal());
    server.queue.push({ commands: [command(6, 'answer')] });
    await vi.advanceTimersByTimeAsync(3000);
    expect(server.heartbeats().at(-1)!.acks).toContainEqual({ command_id: 6, result: 'failed', error: MESSAGES.nothingRinging });
    useLanguage('fr');
    try {
      spies.accept.mockRejectedValueOnce(refusal());
      server.queue.push({ commands: [command(7, 'answer')] });
      await vi.advanceTimersByTimeAsync(3000);
      expect(server.heartbeats().at(-1)!.acks).toContainEqual({ command_id: 7, result: 'failed', error: 'Aucun appel entrant ne sonne dans cette fenêtre.' });
    } finally {
      useLanguage('en');
    }
  });

  it('tells the widget once the server has a failure it reported, which moves the widget state and not the engine', async () => {
    const { server, tellWidget } = await engine({ realtime: false });
    const told = tellWidget.mock.calls.length;
    server.queue.push({ commands: [command(4, 'dtmf', null)] });
    await vi.advanceTimersByTimeAsync(3000);
    expect(server.heartbeats().at(-1)!.acks).toMatchObject([{ command_id: 4, result: 'failed' }]);
    expect(tellWidget).toHaveBeenCalledTimes(told + 1); // the engine and call as they were
    await vi.advanceTimersByTimeAsync(3000); // confirmed: not again
    expect(tellWidget).toHaveBeenCalledTimes(told + 1);
  });

  it('heartbeats every heartbeat_fallback_ms over REST while the socket is down and every heartbeat_ms over the socket while it is up', async () => {
    const { server, socket } = await engine();
    const rest = () => server.heartbeats().length;
    const start = rest();
    await vi.advanceTimersByTimeAsync(9000);
    expect(rest() - start).toBe(3);
    socket.up();
    await vi.advanceTimersByTimeAsync(0);
    const viaSocket = socket.reports.length;
    await vi.advanceTimersByTimeAsync(30_000);
    expect(socket.reports.length - viaSocket).toBe(2);
    expect(rest() - start).toBe(3);
    socket.down();
    await vi.advanceTimersByTimeAsync(6000);
    expect(rest() - start).toBe(5);
  });

  it('claims a dial request, connects the driver with the claim params, and names the call in the next heartbeat; a 404 is dropped', async () => {
    const { server, socket, spies, instance } = await engine();
    server.claims.ci_1 = () => {
      server.current = call('dialing');
      return { status: 200, body: { ok: true, call: call('dialing'), connect: { params: { To: 'ci_1', Biz: 'acc_1', CallerId: '+12025550100' } } } };
    };
    const dial = (id: string) => ({ request_id: id, display: call('queued').display, expires_at: SERVER_NOW_S + 60 });
    socket.work({ dial_requests: [dial('ci_gone'), dial('ci_1')] });
    await vi.advanceTimersByTimeAsync(0);
    expect(server.requests.filter((r) => r.path === '/engine/claim').map((r) => r.body.request_id)).toEqual(['ci_gone', 'ci_1']);
    expect(spies.connect).toHaveBeenCalledWith({ To: 'ci_1', Biz: 'acc_1', CallerId: '+12025550100' });
    expect(server.heartbeats().at(-1)!.call_id).toBe('ci_1');
    expect(instance.model()).toMatchObject({ state: 'call', call: { status: 'dialing', live: true, display: { name: 'Jo Bloggs', number: '+44••••••0123' } } });
    // Offered again: neither request is claimed a second time.
    socket.work({ dial_requests: [dial('ci_gone'), dial('ci_1')] });
    await vi.advanceTimersByTimeAsync(0);
    expect(server.requests.filter((r) => r.path === '/engine/claim')).toHaveLength(2);
  });

  it('connects a call whose claim answer was lost: asks the claim again and gets it, even once a heartbeat lists the call as its own', async () => {
    const { server, socket, spies, instance } = await engine();
    const won = () => ({ status: 200, body: { ok: true, call: call('claimed'), connect: { params: { To: 'ci_1', Biz: 'acc_1', CallerId: '+12025550100' } } } });
    // The server claimed it, then the answer was lost (a proxy's 502); the request is not offered again.
    server.claims.ci_1 = () => {
      server.current = call('claimed');
      server.claims.ci_1 = won;
      return { status: 502, body: { ok: false, error: 'internal', message: 'Bad gateway.' } };
    };
    socket.work({ dial_requests: [{ request_id: 'ci_1', display: call('queued').display, expires_at: SERVER_NOW_S + 60 }] });
    await vi.advanceTimersByTimeAsync(0);
    // The heartbeat the push asked for lists the claimed call as the window's; the claim is asked again all the same.
    expect(server.heartbeats().length).toBeGreaterThan(0);
    expect(instance.model().call).toMatchObject({ status: 'claimed', live: true });
    await vi.advanceTimersByTimeAsync(CLAIM_RETRY_MS);
    expect(server.requests.filter((r) => r.path === '/engine/claim')).toHaveLength(2);
    expect(spies.connect).toHaveBeenCalledTimes(1);
    expect(spies.connect).toHaveBeenCalledWith({ To: 'ci_1', Biz: 'acc_1', CallerId: '+12025550100' });
    await vi.advanceTimersByTimeAsync(CLAIM_RETRY_MS * 5);
    expect(server.requests.filter((r) => r.path === '/engine/claim')).toHaveLength(2);
  });

  it('keeps a call it hung up ended when an answer to a heartbeat sent before the hang-up arrives late, listing it live', async () => {
    const { server, instance } = await engine({ realtime: false });
    server.current = call('connected', { answered_at: SERVER_NOW_S });
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.model().call).toMatchObject({ status: 'connected', live: true });
    // The next heartbeat's answer is slow: it describes the call as it was before the hang-up.
    server.latencyMs = 1000;
    await vi.advanceTimersByTimeAsync(3000);
    server.latencyMs = 0;
    await instance.hangup();
    server.current = null;
    expect(instance.model()).toMatchObject({ state: 'ready', call: { status: 'completed', live: false } });
    await vi.advanceTimersByTimeAsync(1000);
    expect(instance.onCall).toBe(false);
    expect(instance.model()).toMatchObject({ state: 'ready', call: { status: 'completed', live: false } });
    await vi.advanceTimersByTimeAsync(3000);
    expect(server.heartbeats().at(-1)!.call_id).toBeNull();
  });

  it('follows the call from heartbeat answers and shows it ended when the server stops listing it', async () => {
    const { server, instance } = await engine({ realtime: false });
    server.current = call('incoming', { direction: 'inbound' });
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.onCall).toBe(true);
    expect(server.heartbeats().at(-1)!.call_id).toBe('ci_1');
    server.current = call('connected', { direction: 'inbound', answered_at: SERVER_NOW_S });
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.model().call).toMatchObject({ status: 'connected', live: true });
    server.current = null;
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.onCall).toBe(false);
    expect(instance.model()).toMatchObject({ state: 'ready', call: { status: 'ended', live: false } });
  });

  it('hangs up through POST /engine/hangup and says so when the provider could not be reached', async () => {
    const { server, instance } = await engine({ realtime: false });
    server.current = call('connected', { answered_at: SERVER_NOW_S });
    await vi.advanceTimersByTimeAsync(3000);
    server.hangup = () => ({ status: 502, body: { ok: false, error: 'hangup_uncertain', message: 'uncertain' } });
    await instance.hangup();
    expect(server.requests.filter((r) => r.path === '/engine/hangup').at(-1)!.body).toEqual({ call_id: 'ci_1' });
    expect(instance.model()).toMatchObject({ call: { live: true }, message: { text: MESSAGES.hangupUncertain } });
    // Tried again and refused alike: the warning goes while the attempt runs and comes back, so it is heard again.
    const messages: Array<string | null> = [];
    const stop = instance.onChange((model) => messages.push(model.message?.text ?? null));
    await instance.hangup();
    stop();
    expect(messages.slice(1)).toContain(null);
    expect(messages.at(-1)).toBe(MESSAGES.hangupUncertain);
    server.hangup = () => ({ status: 200, body: { ok: true, call: call('completed', { ended_at: SERVER_NOW_S + 5, duration: 5, answered_at: SERVER_NOW_S }) } });
    await instance.hangup();
    expect(instance.model()).toMatchObject({ call: { status: 'completed', live: false }, message: null });
  });

  it("keeps a hang-up warning until the server says the call is over, and says why a call could not be connected until the next call", async () => {
    // A device whose leg the window lets go on a failed hang-up (as the Twilio driver, which does not
    // report a leg it let go itself: drivers/types.ts).
    const { device } = eventfulDevice();
    const { server, instance, spies } = await engine({ realtime: false, driver: device });
    server.current = call('connected', { answered_at: SERVER_NOW_S });
    await vi.advanceTimersByTimeAsync(3000);
    server.hangup = () => ({ status: 502, body: { ok: false, error: 'hangup_uncertain', message: 'uncertain' } });
    await instance.hangup();
    expect(instance.model().message).toMatchObject({ text: MESSAGES.hangupUncertain });
    // The window let go of its own leg; the server still lists the call live: it may still be up,
    // and Hang up stays offered, as the message asks.
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.model()).toMatchObject({ call: { live: true }, message: { text: MESSAGES.hangupUncertain } });
    // The provider ended it after all: the next heartbeat no longer lists it.
    server.current = null;
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.model()).toMatchObject({ call: { live: false }, message: null });

    // A call whose voice leg cannot be connected: the reason stays after the call ended...
    spies.connect.mockRejectedValueOnce(new Error('Device busy'));
    server.hangup = () => ({ status: 200, body: { ok: true, call: call('canceled', { call_id: 'ci_2', request_id: 'ci_2', ended_at: SERVER_NOW_S }) } });
    server.claims.ci_2 = () => ({ status: 200, body: { ok: true, call: call('claimed', { call_id: 'ci_2', request_id: 'ci_2' }), connect: { params: { To: 'ci_2', Biz: 'acc_1', CallerId: '+12025550100' } } } });
    await instance.resume();
    await vi.advanceTimersByTimeAsync(0);
    server.queue.push({ dial_requests: [{ request_id: 'ci_2', display: call('queued').display, expires_at: SERVER_NOW_S + 60 }] });
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.model()).toMatchObject({ call: { live: false }, message: { text: expect.stringContaining(MESSAGES.connectFailed) } });
    await vi.advanceTimersByTimeAsync(6000);
    expect(instance.model().message).toMatchObject({ text: expect.stringContaining(MESSAGES.connectFailed) });
    // ...and goes with the next call.
    server.current = call('incoming', { call_id: 'ci_3', request_id: 'ci_3', direction: 'inbound' });
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.model()).toMatchObject({ call: { live: true }, message: null });
  });

  it('hangs up a claimed call whose voice leg ended before it connected (its microphone failed), and asks the browser for the microphone again', async () => {
    const { device, emit } = eventfulDevice();
    let mic: MicState = 'ready';
    const askMic = vi.fn(async () => mic);
    const { server, instance } = await engine({ realtime: false, driver: device, askMic });
    const hangups = () => server.requests.filter((r) => r.path === '/engine/hangup').map((r) => r.body);
    // A connected call the far end ended: the provider ends it, the window hangs nothing up.
    server.current = call('connected', { answered_at: SERVER_NOW_S });
    await vi.advanceTimersByTimeAsync(3000);
    emit({ type: 'disconnected' });
    server.current = null;
    await vi.advanceTimersByTimeAsync(3000);
    expect(hangups()).toEqual([]);

    // A claimed call: connect() resolved, then the voice SDK could not open the microphone.
    const claimed = call('claimed', { call_id: 'ci_2', request_id: 'ci_2' });
    server.claims.ci_2 = () => {
      server.current = claimed;
      return { status: 200, body: { ok: true, call: claimed, connect: { params: { To: 'ci_2', Biz: 'acc_1', CallerId: '+12025550100' } } } };
    };
    server.hangup = () => ({ status: 200, body: { ok: true, call: call('canceled', { call_id: 'ci_2', request_id: 'ci_2', ended_at: SERVER_NOW_S }) } });
    server.queue.push({ dial_requests: [{ request_id: 'ci_2', display: claimed.display, expires_at: SERVER_NOW_S + 60 }] });
    await vi.advanceTimersByTimeAsync(15_000);
    expect(instance.model()).toMatchObject({ call: { status: 'claimed', live: true } });
    mic = 'denied';
    emit({ type: 'disconnected' });
    emit({ type: 'mic-failed' });
    await vi.advanceTimersByTimeAsync(0);
    server.current = null;
    // The server is told at once (not left claimed, the agent busy, until its connect timeout)...
    expect(hangups()).toEqual([{ call_id: 'ci_2' }]);
    expect(instance.model()).toMatchObject({ call: { status: 'canceled', live: false } });
    // ...and the window, its microphone blocked, is not ready: no call rings an agent who cannot speak.
    expect(askMic).toHaveBeenCalledTimes(2);
    expect(instance.model()).toMatchObject({ state: 'no_mic', message: { text: `${MESSAGES.connectFailed} ${MESSAGES.micDenied}` }, retry: 'Try again' });
    await vi.advanceTimersByTimeAsync(3000);
    expect(server.heartbeats().at(-1)).toMatchObject({ state: 'enabling', mic_ready: false, call_id: null });
  });

  it("leaves a claimed call whose leg ended for another reason to the server (the provider may be recording busy or failed), and a late hang-up answer does not end the next call", async () => {
    const { device, emit } = eventfulDevice();
    const { server, instance } = await engine({ realtime: false, driver: device });
    const hangups = () => server.requests.filter((r) => r.path === '/engine/hangup').map((r) => r.body);
    const claim = (id: string) => offerClaim(server, id);
    // The number was busy at once: the leg ends while the window still has the call as `claimed`.
    claim('ci_2');
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.model()).toMatchObject({ call: { status: 'claimed', live: true } });
    emit({ type: 'disconnected' });
    server.current = call('busy', { call_id: 'ci_2', request_id: 'ci_2', ended_at: SERVER_NOW_S });
    await vi.advanceTimersByTimeAsync(3000);
    expect(hangups()).toEqual([]); // the server records busy; a hang-up would have made it canceled

    // The microphone failed on the next claimed call; the server's answer to its hang-up comes late,
    // once the window already shows the caller ringing after it.
    claim('ci_3');
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.model()).toMatchObject({ call: { status: 'claimed', live: true } });
    server.hangup = () => ({ status: 200, body: { ok: true, call: call('canceled', { call_id: 'ci_3', request_id: 'ci_3', ended_at: SERVER_NOW_S }) } });
    server.hangupLatencyMs = 10_000;
    emit({ type: 'mic-failed' });
    await vi.advanceTimersByTimeAsync(0);
    expect(hangups()).toEqual([{ call_id: 'ci_3' }]);
    server.current = call('incoming', { call_id: 'ci_4', request_id: 'ci_4', direction: 'inbound' });
    await vi.advanceTimersByTimeAsync(5000);
    expect(instance.model()).toMatchObject({ call: { status: 'incoming', live: true } });
    const shown = server.heartbeats().length;
    await vi.advanceTimersByTimeAsync(5000); // the hang-up answer for ci_3 arrives
    expect(instance.model()).toMatchObject({ call: { status: 'incoming', live: true } });
    // never reported let go (the server would flag the ringing call orphaned)
    expect(server.heartbeats().slice(shown).map((h) => h.call_id)).toEqual(expect.arrayContaining(['ci_4']));
    expect(server.heartbeats().slice(shown).filter((h) => h.call_id !== 'ci_4')).toEqual([]);
  });

  it('hangs up a claimed call whose leg ended for no reason it was told, once a heartbeat sent LEG_LOST_GRACE_MS later finds it still claimed (the provider never heard of it)', async () => {
    const { device, emit } = eventfulDevice();
    const { socket, server, instance } = await engine({ driver: device });
    socket.up(); // idle heartbeats 15 s apart: the grace has its own
    const hangups = () => server.requests.filter((r) => r.path === '/engine/hangup').map((r) => r.body);
    const pushClaim = (id: string) => {
      offerClaim(server, id);
      socket.work({ dial_requests: server.queue.shift()!.dial_requests! });
    };
    pushClaim('ci_2');
    await vi.advanceTimersByTimeAsync(1234); // off any heartbeat's beat
    expect(instance.model()).toMatchObject({ call: { status: 'claimed', live: true } });
    server.hangup = () => ({ status: 200, body: { ok: true, call: call('canceled', { call_id: 'ci_2', request_id: 'ci_2', ended_at: SERVER_NOW_S }) } });
    emit({ type: 'disconnected' }); // a signalling failure before Twilio asked the service for the call
    await vi.advanceTimersByTimeAsync(LEG_LOST_GRACE_MS - 1);
    expect(hangups()).toEqual([]); // not before the grace: the provider may yet say busy or failed
    await vi.advanceTimersByTimeAsync(1);
    expect(hangups()).toEqual([{ call_id: 'ci_2' }]); // not left claimed, the agent busy, until the connect timeout
    expect(instance.model()).toMatchObject({ call: { status: 'canceled', live: false }, message: { text: MESSAGES.connectFailed } });
    server.current = null;
    await vi.advanceTimersByTimeAsync(30_000);
    expect(hangups()).toHaveLength(1);

    // The heartbeat the next leg's end sent is answered past the grace, with the state of its
    // report (claimed); by then the provider has the call (dialing): it is not hung up.
    pushClaim('ci_3');
    await vi.advanceTimersByTimeAsync(1234);
    const answerNow = socket.heartbeat.bind(socket);
    socket.heartbeat = vi.fn(async (report: HeartbeatRequest) => {
      const answer = await answerNow(report);
      await new Promise((resolve) => setTimeout(resolve, LEG_LOST_GRACE_MS + 1000));
      return answer;
    });
    emit({ type: 'disconnected' });
    await vi.advanceTimersByTimeAsync(1000);
    socket.heartbeat = vi.fn(answerNow);
    server.current = call('dialing', { call_id: 'ci_3', request_id: 'ci_3' });
    await vi.advanceTimersByTimeAsync(LEG_LOST_GRACE_MS * 2);
    expect(hangups()).toHaveLength(1);
  });

  it('hangs up a call whose microphone failed once, whichever of its end and its error comes first, and never an earlier call for a later failure', async () => {
    const { device, emit } = eventfulDevice();
    const { server, instance } = await engine({ realtime: false, driver: device });
    const hangups = () => server.requests.filter((r) => r.path === '/engine/hangup').map((r) => r.body);
    offerClaim(server, 'ci_2');
    await vi.advanceTimersByTimeAsync(3000);
    server.hangup = () => ({ status: 200, body: { ok: true, call: call('canceled', { call_id: 'ci_2', request_id: 'ci_2', ended_at: SERVER_NOW_S }) } });
    emit({ type: 'mic-failed' });
    emit({ type: 'disconnected' });
    await vi.advanceTimersByTimeAsync(0);
    server.current = call('canceled', { call_id: 'ci_2', request_id: 'ci_2', ended_at: SERVER_NOW_S });
    await vi.advanceTimersByTimeAsync(LEG_LOST_GRACE_MS * 2);
    expect(hangups()).toEqual([{ call_id: 'ci_2' }]);

    // A busy number ends the next claimed call's leg (the server is recording busy); at once an
    // incoming call rings and is answered, and its microphone fails: no earlier call is hung up for it.
    offerClaim(server, 'ci_3');
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.model()).toMatchObject({ call: { status: 'claimed', live: true } });
    emit({ type: 'disconnected' });
    emit({ type: 'incoming', ref: 'ci_4' });
    emit({ type: 'accepted' });
    emit({ type: 'mic-failed' });
    server.current = call('busy', { call_id: 'ci_3', request_id: 'ci_3', ended_at: SERVER_NOW_S });
    await vi.advanceTimersByTimeAsync(LEG_LOST_GRACE_MS * 2);
    expect(hangups()).toEqual([{ call_id: 'ci_2' }]);
    // ...and while the window holds a call, a microphone failure hangs up none but a claimed one
    server.current = call('connected', { call_id: 'ci_4', request_id: 'ci_4', direction: 'inbound', answered_at: SERVER_NOW_S });
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.model()).toMatchObject({ call: { status: 'connected', live: true } });
    emit({ type: 'mic-failed' });
    await vi.advanceTimersByTimeAsync(LEG_LOST_GRACE_MS * 2);
    expect(hangups()).toEqual([{ call_id: 'ci_2' }]);
  });

  it('mutes from its own button (when the policy allows) and reports muted in the next heartbeat', async () => {
    const { server, instance, spies } = await engine({ realtime: false });
    server.current = call('connected', { answered_at: SERVER_NOW_S });
    await vi.advanceTimersByTimeAsync(3000);
    instance.toggleMute();
    await vi.advanceTimersByTimeAsync(0);
    expect(spies.mute).toHaveBeenCalledWith(true);
    expect(server.heartbeats().at(-1)).toMatchObject({ muted: true });
    expect(instance.model()).toMatchObject({ muted: true, muteAllowed: true });
  });

  it("follows the agent's controls as each heartbeat answer gives them: Mute goes when an operator takes it away, Unmute stays while muted", async () => {
    const { server, instance } = await engine({ realtime: false });
    server.current = call('connected', { answered_at: SERVER_NOW_S });
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.model()).toMatchObject({ muteAllowed: true });
    instance.toggleMute();
    server.queue.push({ controls: ['dtmf'] });
    await vi.advanceTimersByTimeAsync(0);
    expect(instance.model()).toMatchObject({ muted: true, muteAllowed: true });
    instance.toggleMute();
    await vi.advanceTimersByTimeAsync(0);
    expect(instance.model()).toMatchObject({ muted: false, muteAllowed: false });
  });

  it('reports whether its device is registered for incoming calls, and registers it or lets it go as each heartbeat answer says they are allowed', async () => {
    const driver = new SimulatedDriver();
    const registered = vi.spyOn(driver, 'registered', 'get').mockReturnValue(false);
    const wanted = vi.spyOn(driver, 'setRegistration');
    const { server } = await engine({ realtime: false, driver });
    expect(server.heartbeats().at(-1)).toMatchObject({ state: 'ready', registered: false });
    registered.mockReturnValue(true);
    server.queue.push({ inbound: false });
    await vi.advanceTimersByTimeAsync(3000);
    expect(server.heartbeats().at(-1)).toMatchObject({ registered: true });
    expect(wanted).toHaveBeenLastCalledWith(false);
    server.queue.push({ inbound: true });
    await vi.advanceTimersByTimeAsync(3000);
    expect(wanted).toHaveBeenLastCalledWith(true);
  });

  it('reports a registration the provider dropped at once, not at the next periodic heartbeat: no incoming call is routed to a window that cannot ring', async () => {
    const { device, emit } = eventfulDevice();
    const registered = vi.spyOn(device, 'registered', 'get').mockReturnValue(true);
    const { server } = await engine({ realtime: false, driver: device });
    await vi.advanceTimersByTimeAsync(15_000);
    const before = server.heartbeats().length;
    expect(server.heartbeats().at(-1)).toMatchObject({ state: 'ready', registered: true });
    registered.mockReturnValue(false);
    emit({ type: 'unregistered' });
    await vi.advanceTimersByTimeAsync(0);
    expect(server.heartbeats()).toHaveLength(before + 1);
    expect(server.heartbeats().at(-1)).toMatchObject({ state: 'ready', registered: false });
  });

  it('heartbeats in the shape a node of an earlier release takes: no `registered` until an answer shows a node that knows it, and a report refused for it goes again without it at once', async () => {
    const { server, instance } = await engine({ realtime: false });
    expect(server.heartbeats()[0]).not.toHaveProperty('registered');
    expect(server.heartbeats().at(-1)).toHaveProperty('registered', true);
    // a rolling upgrade: the next heartbeat reaches a node of the earlier release
    server.earlierRelease = true;
    const before = server.heartbeats().length;
    await vi.advanceTimersByTimeAsync(3000);
    const sent = server.heartbeats().slice(before);
    expect(sent.map((report) => 'registered' in report)).toEqual([true, false]);
    expect(instance.model()).toMatchObject({ state: 'ready', message: null });
    await vi.advanceTimersByTimeAsync(3000);
    expect(server.heartbeats().at(-1)).not.toHaveProperty('registered');
  });

  it('starts the next call unmuted when it follows a muted one at once (the held call goes from one to the other)', async () => {
    const { server, instance } = await engine({ realtime: false });
    server.current = call('connected', { answered_at: SERVER_NOW_S });
    await vi.advanceTimersByTimeAsync(3000);
    instance.toggleMute();
    await vi.advanceTimersByTimeAsync(0);
    expect(instance.model()).toMatchObject({ muted: true });
    server.current = call('incoming', { request_id: 'ci_2', call_id: 'ci_2', direction: 'inbound' });
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.model()).toMatchObject({ muted: false, call: { status: 'incoming' } });
    await vi.advanceTimersByTimeAsync(3000);
    expect(server.heartbeats().at(-1)).toMatchObject({ call_id: 'ci_2', muted: false });
  });

  it('loads a voice driver that failed to load again with the heartbeats, saying so until it comes, then starts it', async () => {
    const device = new SimulatedDriver();
    const started = vi.spyOn(device, 'start');
    let reachable = false;
    let attempts = 0;
    const loadDriver = async () => {
      attempts += 1;
      if (!reachable) throw new Error('blocked');
      return device;
    };
    const { instance } = await engine({ realtime: false, loadDriver });
    await vi.advanceTimersByTimeAsync(3000);
    // the voice token came meanwhile: the failure is still what is said
    expect(instance.model().message).toEqual({ text: MESSAGES.voiceScriptFailed, tone: 'warn' });
    // the microphone is granted: the voice line is what the window waits for
    expect(instance.model()).toMatchObject({ state: 'enabling', voiceStarting: true });
    expect(attempts).toBe(2);
    // each failure in a row doubles the wait (3, 6, 12 … s, at most 5 min), heartbeats every 3 s meanwhile
    await vi.advanceTimersByTimeAsync(6000);
    expect(attempts).toBe(3);
    await vi.advanceTimersByTimeAsync(9000);
    expect(attempts).toBe(3);
    await vi.advanceTimersByTimeAsync(3000);
    expect(attempts).toBe(4);
    // a shift of 8 hours tries some hundred times, not ten thousand
    await vi.advanceTimersByTimeAsync(8 * 3600_000);
    expect(attempts).toBeLessThan(110);
    reachable = true;
    await vi.advanceTimersByTimeAsync(300_000);
    expect(started).toHaveBeenCalledTimes(1);
    expect(instance.model().message).toBeNull();
    const settled = attempts;
    await vi.advanceTimersByTimeAsync(9000);
    expect(attempts).toBe(settled);
  });

  it("says a device's error until the device next shows it works (a call rings, connects or ends), not until the next voice token", async () => {
    const { device, emit } = eventfulDevice();
    const { instance } = await engine({ realtime: false, driver: device });
    emit({ type: 'error', code: 53000 });
    expect(instance.model().message).toMatchObject({ text: 'The connection to the voice service was interrupted (code 53000).' });
    emit({ type: 'muted', muted: false });
    expect(instance.model().message).toMatchObject({ text: 'The connection to the voice service was interrupted (code 53000).' });
    emit({ type: 'incoming', ref: null });
    expect(instance.model().message).toBeNull();
  });

  it("words the voice provider's errors in the agent's language, with the provider's code for support", async () => {
    const { device, emit } = eventfulDevice();
    const { instance } = await engine({ realtime: false, driver: device });
    emit({ type: 'error', code: 31206 });
    expect(instance.model().message).toMatchObject({ text: 'The voice service is receiving too many requests; try again in a moment (code 31206).' });
    emit({ type: 'error', code: 31486 }); // a code the window has no words of its own for
    expect(instance.model().message).toMatchObject({ text: 'The voice service reported an error (code 31486).' });
    emit({ type: 'error', code: null });
    expect(instance.model().message).toMatchObject({ text: 'The voice service reported an error.' });
    useLanguage('fr');
    try {
      emit({ type: 'error', code: 53405 });
      expect(instance.model().message).toMatchObject({ text: 'Le son de l’appel ne passe pas : le réseau ou un pare-feu le bloque peut-être (code 53405).' });
      emit({ type: 'error', code: 20104, lasting: true });
      expect(instance.model().message).toMatchObject({
        text: 'Les appels entrants ne peuvent pas sonner dans cette fenêtre. Le service vocal n’a pas accepté l’identification de cette fenêtre (code 20104).',
      });
    } finally {
      useLanguage('en');
    }
  });

  it('says a failed registration for incoming calls until the device registers, whatever outgoing calls do meanwhile', async () => {
    const { device, emit } = eventfulDevice();
    const { instance } = await engine({ realtime: false, driver: device });
    emit({ type: 'error', code: 31204, lasting: true });
    emit({ type: 'ringing' });
    emit({ type: 'accepted' });
    emit({ type: 'disconnected' });
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.model().message).toMatchObject({ text: 'Incoming calls cannot ring this window. The voice service did not accept this window’s sign-in (code 31204).' });
    // a passing error meanwhile is said, then the registration's again once the device works
    emit({ type: 'error', code: 53000 });
    expect(instance.model().message).toMatchObject({ text: 'The connection to the voice service was interrupted (code 53000).' });
    emit({ type: 'ringing' });
    expect(instance.model().message).toMatchObject({ text: 'Incoming calls cannot ring this window. The voice service did not accept this window’s sign-in (code 31204).' });
    // a new voice token (its registration still under way) does not wipe it
    await vi.advanceTimersByTimeAsync(3600_000);
    expect(instance.model().message).toMatchObject({ text: 'Incoming calls cannot ring this window. The voice service did not accept this window’s sign-in (code 31204).' });
    emit({ type: 'registered' });
    expect(instance.model().message).toBeNull();
  });

  it('keeps saying why a call failed once it has ended (the device reports the error, then the end, at once)', async () => {
    const { device, emit } = eventfulDevice();
    const { instance } = await engine({ realtime: false, driver: device });
    emit({ type: 'accepted' });
    emit({ type: 'error', code: 53405 });
    emit({ type: 'disconnected' });
    await vi.advanceTimersByTimeAsync(3000);
    expect(instance.model().message).toMatchObject({ text: 'The call’s audio could not get through: the network or a firewall may be blocking it (code 53405).' });
    // the next call ringing shows the device works again
    emit({ type: 'incoming', ref: null });
    expect(instance.model().message).toBeNull();
  });

  it('shows nothing of a heartbeat answer that arrives after a final end: its call stays over on the closed window', async () => {
    const { instance, server, socket } = await engine();
    socket.down(); // heartbeats go over REST
    await vi.advanceTimersByTimeAsync(0);
    server.current = call('connected', { answered_at: SERVER_NOW_S });
    server.latencyMs = 1000;
    const sent = server.heartbeats().length;
    instance.nudge(); // a heartbeat on its way, its answer carrying the live call
    await vi.advanceTimersByTimeAsync(10);
    expect(server.heartbeats()).toHaveLength(sent + 1);
    socket.end({ code: 'agent_disabled', final: true, message: 'Calls are not enabled for you.' });
    await vi.advanceTimersByTimeAsync(2000);
    expect(instance.model()).toMatchObject({ state: 'closed' });
    expect(instance.onCall).toBe(false);
    expect(instance.model().call?.live ?? false).toBe(false);
  });

  it('stops for good on a final socket end: says why, forgets a dead pairing, sends no more heartbeats', async () => {
    const { server, socket, store, instance } = await engine();
    socket.end({ code: 'replaced', final: true, message: 'This call window was closed or replaced by a newer one.' });
    const count = server.heartbeats().length;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(server.heartbeats()).toHaveLength(count);
    expect(socket.stop).toHaveBeenCalled();
    expect(store.getItem(STORAGE_KEY)).toBeNull();
    expect(instance.model()).toMatchObject({ state: 'closed', message: { text: MESSAGES.replaced, tone: 'error' }, connection: null });
  });

  it('says why it stopped in the language it speaks when that happens', async () => {
    const { socket, instance } = await engine();
    useLanguage('fr');
    try {
      socket.end({ code: 'replaced', final: true, message: 'This call window was closed or replaced by a newer one.' });
      expect(instance.model()).toMatchObject({ state: 'closed', message: { text: 'Cette fenêtre d’appel a été remplacée par une plus récente. Vous pouvez la fermer.' } });
    } finally {
      useLanguage('en');
    }
  });

  it('stops, saying why, when its origin is refused: REST refuses the same origins as the socket', async () => {
    const { server, socket, instance } = await engine();
    socket.end({ code: 'origin_not_allowed', final: true, message: 'This extension is not allowed on this server.' });
    const count = server.heartbeats().length;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(server.heartbeats()).toHaveLength(count);
    expect(instance.model()).toMatchObject({ state: 'closed', message: { text: 'This extension is not allowed on this server.', tone: 'error' } });
  });

  it('lets go of a call whose device leg ended, even while the server still lists it', async () => {
    // A device that ends legs itself (the Twilio driver does, through its `disconnected` event).
    const { device, emit } = eventfulDevice();
    const { server, instance } = await engine({ realtime: false, driver: device });
    server.current = call('connected', { answered_at: SERVER_NOW_S });
    await vi.advanceTimersByTimeAsync(3000);
    expect(server.heartbeats().at(-1)!.call_id).toBe('ci_1');
    emit({ type: 'disconnected' });
    await vi.advanceTimersByTimeAsync(3000);
    expect(server.heartbeats().at(-1)!.call_id).toBeNull();
    expect(instance.model()).toMatchObject({ state: 'ready', call: { status: 'ended', live: false } });
  });

  it('sends no heartbeat, tick or immediate, for as long as a rate-limited refusal asked, then carries on', async () => {
    // the socket stays down: heartbeats go over REST, every heartbeat_fallback_ms
    const { server, socket } = await engine();
    server.heartbeatStatus = 429;
    server.heartbeatRetryAfter = 20;
    await vi.advanceTimersByTimeAsync(3000);
    const refused = server.heartbeats().length;
    server.heartbeatStatus = 200;
    // the fallback period is 3 s: six ticks fall inside the wait, and a push's immediate beat too
    socket.work({ commands: [] });
    await vi.advanceTimersByTimeAsync(19_000);
    expect(server.heartbeats()).toHaveLength(refused);
    await vi.advanceTimersByTimeAsync(3000);
    expect(server.heartbeats()).toHaveLength(refused + 1);
    await vi.advanceTimersByTimeAsync(3000);
    expect(server.heartbeats()).toHaveLength(refused + 2);
  });

  it('gives up a heartbeat never answered after REQUEST_TIMEOUT_MS, aborting it, and heartbeats on', async () => {
    const { server, instance } = await engine({ realtime: false });
    server.hangHeartbeats = 1;
    await vi.advanceTimersByTimeAsync(3000);
    const hung = server.requests.filter((r) => r.path === '/engine/heartbeat').at(-1)!;
    const count = server.heartbeats().length;
    // never two at once: the ticks meanwhile wait for it
    await vi.advanceTimersByTimeAsync(REQUEST_TIMEOUT_MS - 1);
    expect(server.heartbeats()).toHaveLength(count);
    expect(hung.signal?.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(hung.signal?.aborted).toBe(true);
    await vi.advanceTimersByTimeAsync(6000);
    expect(server.heartbeats().length).toBeGreaterThanOrEqual(count + 2);
    expect(instance.model()).toMatchObject({ state: 'ready', message: null }); // answered again: no longer 'reconnecting'
  });

  it('stops when a heartbeat is refused with 401', async () => {
    const { server, instance } = await engine({ realtime: false });
    server.heartbeatStatus = 401;
    await vi.advanceTimersByTimeAsync(3000);
    const count = server.heartbeats().length;
    await vi.advanceTimersByTimeAsync(30_000);
    expect(server.heartbeats()).toHaveLength(count);
    expect(instance.model()).toMatchObject({ state: 'closed', message: { text: MESSAGES.unauthorized } });
  });

  it('on unload posts /engine/close with keepalive and the Authorization header, then stops', async () => {
    const { server, instance } = await engine({ realtime: false });
    instance.unload();
    const close = server.requests.find((r) => r.path === '/engine/close')!;
    expect(close).toMatchObject({ keepalive: true, body: { reason: 'unload' } });
    expect(close.headers.authorization).toBe('Bearer c2ce_token');
    const count = server.heartbeats().length;
    await vi.advanceTimersByTimeAsync(30_000);
    expect(server.heartbeats()).toHaveLength(count);
  });
});
