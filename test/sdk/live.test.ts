/**
 * The SDK core (session, push and polling, commands, the state machine; no DOM) against the real
 * API and a real gateway: the contract as the server implements it, not as the SDK assumes it.
 * The integrator's backend is played by a few lines that forward to POST /sessions and POST /calls.
 */
import { io } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { API_PREFIX } from '../../api/config.js';
import { startGateway, type Gateway } from '../../gateway/server.js';
import { Click2CallWidget } from '../../sdk/src/client.js';
import { systemClock } from '../../sdk/src/timing.js';
import type { SocketFactory } from '../../sdk/src/transport.js';
import { storeDrivers } from '../helpers/env.js';
import { READY } from '../helpers/flows.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { ORIGIN, US_NUMBER, seedTenant, type Tenant } from '../helpers/tenant.js';

/** A step through the real gateway and store may take longer than vi.waitFor's 1 s default on a busy machine. */
const SETTLE = { timeout: 10_000 };

const BASE = 'http://c2c.test' + API_PREFIX;

describe.each(storeDrivers().slice(0, 1))('the SDK against the service on %s', (driver) => {
  let h: Harness;
  let t: Tenant;
  let api: Client;
  let gateway: Gateway;
  const sessionsAsked: number[] = [];
  const widgets: Click2CallWidget[] = [];

  /** fetch for the SDK: the widget API through inject (with the page's Origin), and the integrator's endpoints. */
  const fetchFn = async (input: string, init: RequestInit = {}): Promise<Response> => {
    const body = typeof init.body === 'string' ? JSON.parse(init.body) : undefined;
    const agent = { type: 'email', value: t.agent.email };
    let reply: { status: number; body: unknown; headers: Record<string, unknown> };
    if (input === '/crm/session') {
      sessionsAsked.push(Date.now());
      reply = await api.post('/sessions', { integration_id: body.integration_id, agent, origin: body.origin }, { auth: t.serverKey });
    } else if (input === '/crm/call') {
      reply = await api.post('/calls', { integration_id: t.integrationId, agent, phone_number: US_NUMBER, ...body }, { auth: t.serverKey });
    } else {
      const headers = Object.fromEntries(Object.entries((init.headers ?? {}) as Record<string, string>).map(([k, v]) => [k.toLowerCase(), v]));
      const response = await h.app.inject({ method: init.method as 'GET' | 'POST', url: input.replace('http://c2c.test', ''), headers: { ...headers, origin: ORIGIN }, payload: init.body as string | undefined });
      reply = { status: response.statusCode, body: response.body === '' ? undefined : JSON.parse(response.body), headers: response.headers };
    }
    const etag = reply.headers.etag;
    return new Response(reply.status === 304 || reply.body === undefined ? null : JSON.stringify(reply.body), {
      status: reply.status,
      headers: typeof etag === 'string' ? { etag } : {},
    });
  };

  // Node's socket.io-client sends no Origin by itself; a browser always does.
  const ioFactory: SocketFactory = (url, options) => io(url, { ...options, extraHeaders: { origin: ORIGIN } }) as never;

  let replaceWindow: ReturnType<typeof vi.fn>;
  const start = () => {
    const w = new Click2CallWidget(
      { integrationId: t.integrationId, sessionEndpoint: '/crm/session', requestCallEndpoint: '/crm/call', apiBaseUrl: BASE },
      {
        fetch: fetchFn,
        io: ioFactory,
        clock: systemClock,
        open: () => ({ closed: false, name: '', location: { href: 'about:blank', replace: replaceWindow }, document: { body: {} }, focus() {}, close() {} }) as never,
        storage: null,
        origin: ORIGIN,
        scriptOrigin: null,
      },
    ).start();
    widgets.push(w);
    return w;
  };

  beforeAll(async () => {
    h = await createHarness(driver);
    h.services.pusher.start();
    gateway = await startGateway(h.services, { port: 0, host: '127.0.0.1' });
    h.services.realtime.available = true;
    h.services.realtime.url = `http://127.0.0.1:${gateway.port}`;
    t = await seedTenant(h.services);
    api = client(h.app);
    replaceWindow = vi.fn();
  });
  afterAll(async () => {
    for (const w of widgets) w.detach();
    await gateway?.close();
    await h?.close();
  });

  it('runs a whole session: offline, enable, ready, availability, a call, hangup, a revoked token', async () => {
    const w = start();
    const states: string[] = [];
    w.on('statechange', (e) => states.push(e.state));
    await vi.waitFor(() => expect(w.getState().state).toBe('offline'), SETTLE);
    expect(w.getState().agent?.identifier).toBe(t.agent.email);
    await vi.waitFor(() => expect((w as unknown as { transport: { status: string } }).transport.status).toBe('push'), SETTLE);

    // enableCalls: the window is opened at once, then sent to window_url with the ticket in the fragment.
    expect(w.enableCalls()).toBe(true);
    expect(w.getState().state).toBe('enabling');
    await vi.waitFor(() => expect(replaceWindow).toHaveBeenCalled(), SETTLE);
    const windowUrl = new URL(replaceWindow.mock.calls[0]![0] as string);
    const ticket = new URLSearchParams(windowUrl.hash.slice(1)).get('ticket')!;
    const paired = await api.post('/engine/pair', { ticket, simulated: true });
    expect(paired.status).toBe(201);
    const engineToken = paired.body.engine_token as string;
    await api.post('/engine/voice-token', undefined, { auth: engineToken });
    await api.post('/engine/heartbeat', READY, { auth: engineToken });
    await vi.waitFor(() => expect(w.getState().state).toBe('ready'), SETTLE);

    // Availability is the server's: done at once, confirmed by the pushed snapshot.
    await expect(w.setAvailability(false)).resolves.toMatchObject({ ok: true, status: 'done' });
    await vi.waitFor(() => expect(w.getState().state).toBe('unavailable'), SETTLE);
    await w.setAvailability(true);
    await vi.waitFor(() => expect(w.getState().state).toBe('ready'), SETTLE);

    // A call requested through the integrator's backend shows up; a hangup ends it server-side.
    const requested = (await w.requestCall({ contact_reference: 'crm-42', display_name: 'Jo Bloggs' })) as { ok: boolean; request_id: string };
    expect(requested).toMatchObject({ ok: true, status: 'queued' });
    await vi.waitFor(() => expect(w.getState()).toMatchObject({ state: 'call', call: { request_id: requested.request_id } }), SETTLE);
    expect(w.getState().call?.display).toMatchObject({ name: 'Jo Bloggs', contact_reference: 'crm-42' });
    await expect(w.hangup()).resolves.toMatchObject({ status: 'done' });
    await vi.waitFor(() => expect(w.getState()).toMatchObject({ state: 'ready', call: { status: 'canceled' } }), SETTLE);

    // mute needs a connected call: the server's refusal comes back as the command's error.
    const failures: string[] = [];
    w.on('commandfailed', (f) => failures.push(f.error));
    await expect(w.setMuted(true)).rejects.toMatchObject({ code: 'invalid_state' });
    expect(failures).toEqual(['invalid_state']);

    // The token is revoked behind the SDK's back: the gateway ends the socket (unauthorized, final)
    // and the SDK asks the session endpoint once more, then carries on.
    const asked = sessionsAsked.length;
    const token = (w as unknown as { session: { token: string } }).session.token;
    expect((await api.post('/widget/revoke', undefined, { auth: token, origin: ORIGIN })).status).toBe(200);
    await vi.waitFor(() => expect(sessionsAsked.length).toBe(asked + 1), SETTLE);
    await vi.waitFor(() => expect(w.getState().state).toBe('ready'), SETTLE);
    await vi.waitFor(() => expect((w as unknown as { transport: { status: string } }).transport.status).toBe('push'), SETTLE);
    await expect(w.setAvailability(false)).resolves.toMatchObject({ status: 'done' });
    await vi.waitFor(() => expect(w.getState().state).toBe('unavailable'), SETTLE);

    // endSession revokes the credential for good.
    const last = (w as unknown as { session: { token: string } }).session.token;
    expect(await w.endSession()).toMatchObject({ ok: true });
    expect((await api.get('/widget/state', { auth: last, origin: ORIGIN })).status).toBe(401);
    expect(w.getState().state).toBe('unauthorized');
    expect(states).toContain('enabling');
  });

  it('polls with If-None-Match when the service has no gateway, and gets 304s', async () => {
    h.services.realtime.available = false;
    try {
      const w = start();
      await vi.waitFor(() => expect(['ready', 'unavailable', 'offline']).toContain(w.getState().state), SETTLE);
      const polls: number[] = [];
      const transport = (w as unknown as { transport: { d: { getState: (etag: string | null) => Promise<{ status: number }> } } }).transport;
      const original = transport.d.getState;
      transport.d.getState = async (etag) => {
        const answer = await original(etag);
        polls.push(answer.status);
        return answer;
      };
      await vi.waitFor(() => expect(polls).toContain(304), { timeout: 8000, interval: 200 });
    } finally {
      h.services.realtime.available = true;
    }
  });
});
