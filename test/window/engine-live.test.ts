/**
 * The call window's engine against the real service: its own pairing, REST client and socket
 * (window/src) talking to a real API and gateway on a real store, with the simulated voice driver
 * the product ships. Where engine.test.ts scripts the server to reach every timing corner, this
 * suite checks that the engine and the service agree on the contract: pushed work carried out once
 * and acked, the engine's reports reaching the widget, an outgoing call claimed, controlled and
 * ended, and a final end stopping the window.
 */
import { io } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { API_PREFIX } from '../../api/config.js';
import { EngineApi } from '../../window/src/api.js';
import { SimulatedDriver } from '../../window/src/drivers/simulated.js';
import { Engine } from '../../window/src/engine.js';
import { MESSAGES } from '../../window/src/messages.js';
import { establish } from '../../window/src/session.js';
import { EngineSocket, type EngineSocketIo } from '../../window/src/socket.js';
import { TimerTicker } from '../../window/src/ticker.js';
import type { ViewModel } from '../../window/src/ui.js';
import { createMember } from '../../api/domain/operator/accounts.js';
import { storeDrivers } from '../helpers/env.js';
import { command, launchTicket, openSession, requestCall, widgetState } from '../helpers/flows.js';
import { createGatewayHarness, type GatewayHarness } from '../helpers/gateway.js';
import { client, type Client, type Harness } from '../helpers/harness.js';
import { seedTenant, type Tenant } from '../helpers/tenant.js';
import { memoryStorage } from '../helpers/storage.js';

/** A step through the real gateway and store may take longer than vi.waitFor's 1 s default on a busy machine. */
const SETTLE = { timeout: 10_000, interval: 20 };
/** for waits that read the REST API: its rate limits' windows move with the test's clock, which stands still */
const POLL = { timeout: 10_000, interval: 500 };

describe.each(storeDrivers().slice(0, 1))('the call window engine against the service on %s', (driver) => {
  let h: Harness;
  let t: Tenant;
  let api: Client;
  let live: GatewayHarness;
  const engines: Engine[] = [];

  /** fetch for the window: the engine API through inject, from the service's own page (the window's origin). */
  const fetchFn = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const headers = Object.fromEntries(Object.entries((init.headers ?? {}) as Record<string, string>).map(([k, v]) => [k.toLowerCase(), v]));
    const response = await h.app.inject({
      method: (init.method ?? 'GET') as 'GET' | 'POST',
      url: String(input).replace(h.config.siteUrl, ''),
      headers: { ...headers, origin: h.config.siteUrl },
      payload: init.body as string | undefined,
    });
    const retryAfter = response.headers['retry-after'];
    return new Response(response.body === '' ? null : response.body, { status: response.statusCode, headers: typeof retryAfter === 'string' ? { 'retry-after': retryAfter } : {} });
  };

  /** Opens a call window for the agent as the widget would (session, ticket) and runs its engine. */
  async function openWindow(email = t.agent.email) {
    const widgetToken = await openSession(api, t, email);
    const ticket = await launchTicket(api, widgetToken);
    const engineApi = new EngineApi(h.config.siteUrl + API_PREFIX, fetchFn);
    const paired = await establish(engineApi, memoryStorage(), ticket, true);
    if (!paired.ok) throw new Error(`pairing refused: ${paired.message}`);
    const device = new SimulatedDriver();
    const effects = { mute: vi.spyOn(device, 'mute'), sendDigits: vi.spyOn(device, 'sendDigits'), disconnect: vi.spyOn(device, 'disconnect') };
    const focus = vi.fn();
    /** the command ids that came by push (the socket's `work`), not in a heartbeat's answer */
    const pushed: number[] = [];
    const engine = new Engine(paired.paired, {
      api: engineApi,
      storage: memoryStorage(),
      loadDriver: async () => device,
      ticker: new TimerTicker(),
      // Node's socket.io-client sends no Origin by itself; the window's page always does.
      connectSocket: (p, handlers) =>
        new EngineSocket((url, options) => io(url, { ...options, transports: ['websocket'], extraHeaders: { origin: h.config.siteUrl } }) as EngineSocketIo, p.realtime, p.engine_token, {
          ...handlers,
          onWork: (work) => {
            pushed.push(...work.commands.map((command) => command.command_id));
            handlers.onWork(work);
          },
        }),
      askMic: async () => 'ready',
      focus,
      now: () => Date.now(),
    });
    engines.push(engine);
    const models: ViewModel[] = [];
    engine.onChange((model) => models.push(model));
    await engine.start(paired.first);
    return { widgetToken, engine, effects, focus, models, pushed, engineId: paired.paired.engine.id };
  }

  beforeAll(async () => {
    live = await createGatewayHarness(driver);
    h = live.h;
    // where the pairing answer sends the window's socket
    h.services.realtime.url = live.url;
    t = await seedTenant(h.services);
    api = client(h.app);
  });
  afterAll(async () => {
    for (const engine of engines) engine.unload();
    await live?.close();
  });

  it('gets ready, live on its socket, and the widget sees it; a command pushed to it is carried out once and acked', async () => {
    const window = await openWindow();
    await vi.waitFor(() => expect(window.engine.model()).toMatchObject({ state: 'ready', connection: 'live' }), SETTLE);
    await vi.waitFor(async () => expect((await widgetState(api, window.widgetToken)).body.engine).toMatchObject({ state: 'ready', mic_ready: true, live: true }), POLL);
    const sent = await command(api, window.widgetToken, { kind: 'focus', request_id: 'live-focus' });
    expect(sent.body).toMatchObject({ ok: true, status: 'queued' });
    await vi.waitFor(() => expect(window.focus).toHaveBeenCalledTimes(1), SETTLE);
    expect(window.pushed).toContain(sent.body.command_id);
    await vi.waitFor(async () => {
      const [row] = await h.services.db.query<{ status: string }>('SELECT status FROM widget_commands WHERE id = $1', [sent.body.command_id]);
      expect(row).toMatchObject({ status: 'done' });
    }, SETTLE);
    // a replay of the request_id is answered as the first, and does not run it again
    expect((await command(api, window.widgetToken, { kind: 'focus', request_id: 'live-focus' })).body.command_id).toBe(sent.body.command_id);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(window.focus).toHaveBeenCalledTimes(1);
  });

  it('claims a call asked for over REST, mutes, sends digits and hangs up as the widget asks, and the widget sees each step', async () => {
    const window = await openWindow();
    await vi.waitFor(() => expect(window.engine.model()).toMatchObject({ state: 'ready', connection: 'live' }), SETTLE);
    const requested = await requestCall(api, t);
    expect(requested.status, JSON.stringify(requested.body)).toBe(202);
    const id = requested.body.request_id as string;
    // the dial request is pushed, the window claims it, and the simulated provider rings and answers
    // (what the window shows is watched; the REST reads are few, on a clock that does not move
    // them out of their rate limit's window)
    await vi.waitFor(() => expect(window.engine.model().call?.timing).toMatchObject({ call_id: id }), SETTLE);
    await h.clock.advanceSeconds(3);
    await vi.waitFor(() => expect(window.engine.model().call).toMatchObject({ status: 'connected' }), SETTLE);
    expect((await api.get(`/calls/${id}`, { auth: t.serverKey })).body).toMatchObject({ status: 'connected' });

    expect((await command(api, window.widgetToken, { kind: 'mute', request_id: 'live-mute', ref: id })).body).toMatchObject({ ok: true });
    await vi.waitFor(() => expect(window.effects.mute).toHaveBeenCalledWith(true), SETTLE);
    await vi.waitFor(() => expect(window.engine.model().muted).toBe(true), SETTLE);
    await vi.waitFor(async () => expect((await widgetState(api, window.widgetToken)).body.engine.muted).toBe(true), POLL);

    expect((await command(api, window.widgetToken, { kind: 'dtmf', request_id: 'live-dtmf', ref: id, digits: '12#' })).body).toMatchObject({ ok: true });
    await vi.waitFor(() => expect(window.effects.sendDigits).toHaveBeenCalledWith('12#'), SETTLE);

    expect((await command(api, window.widgetToken, { kind: 'hangup', request_id: 'live-hangup', ref: id })).body).toMatchObject({ ok: true });
    await vi.waitFor(() => expect(window.engine.model().call).toMatchObject({ status: 'completed' }), SETTLE);
    expect((await api.get(`/calls/${id}`, { auth: t.serverKey })).body).toMatchObject({ status: 'completed' });
    await vi.waitFor(async () => expect((await widgetState(api, window.widgetToken)).body.engine).toMatchObject({ busy: false, muted: false }), POLL);
  });

  it('stops for good when a newer window replaces it, saying so, and leaves the newer one working', async () => {
    const bea = await createMember({ db: h.services.db, bus: h.services.bus, clock: h.clock }, { accountId: t.accountId, email: 'bea@acme.example', name: 'Bea', departmentId: t.salesId });
    const older = await openWindow(bea.email);
    await vi.waitFor(() => expect(older.engine.model()).toMatchObject({ state: 'ready', connection: 'live' }), SETTLE);
    const newer = await openWindow(bea.email);
    await vi.waitFor(() => expect(older.engine.stopped).toBe(true), SETTLE);
    expect(older.engine.model().message?.text).toBe(MESSAGES.replaced);
    await vi.waitFor(() => expect(newer.engine.model()).toMatchObject({ state: 'ready', connection: 'live' }), SETTLE);
    const sent = await command(api, newer.widgetToken, { kind: 'focus', request_id: 'after-replace' });
    await vi.waitFor(() => expect(newer.focus).toHaveBeenCalledTimes(1), SETTLE);
    expect(newer.pushed).toContain(sent.body.command_id);
    expect(older.focus).not.toHaveBeenCalled();
    expect(sent.body).toMatchObject({ ok: true });
  });
});
