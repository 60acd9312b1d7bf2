/**
 * Rate limits (spec section 8) with a clock the test controls: 300/min per IP and 600/min per
 * integration on server-key endpoints, 600/min per IP on widget endpoints, 429 rate_limited with
 * Retry-After counting down to the end of the window.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { connect, type AddressInfo, type Socket } from 'node:net';
import WebSocket from 'ws';
import { updateMember } from '../../api/domain/operator/accounts.js';
import { addressKey } from '../../api/ratelimit/keys.js';
import { redisUrl, storeDrivers } from '../helpers/env.js';
import { openTestDatabase } from '../helpers/databases.js';
import { ManualClock } from '../../api/clock.js';
import { API_PREFIX } from '../../api/config.js';
import type { TrustProxy } from '../../api/http/client-address.js';
import { expectError } from '../helpers/expect.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';
import { command, heartbeat, READY, readyAgent, type Agent } from '../helpers/flows.js';
import { createGatewayHarness, type GatewayHarness } from '../helpers/gateway.js';
import { freePort, spawnRedis } from '../helpers/processes.js';
import { openSocket, request, type TestSocket } from '../helpers/sockets.js';

/** A step through the real gateway and store may take longer than vi.waitFor's 1 s default on a busy machine. */
const SETTLE = { timeout: 10_000 };

const [driver] = storeDrivers();

/** Sends n requests in turn, none of which may be refused. */
const burst = async (n: number, send: (i: number) => Promise<{ status: number }>) => {
  for (let i = 0; i < n; i += 1) {
    const r = await send(i);
    expect(r.status).not.toBe(429);
  }
};

describe('the address a per-address limit counts by', () => {
  it('is an IPv6 address by its /64, whatever its spelling, and an IPv4 one (mapped, or with a port a proxy left on it) as it is', () => {
    expect(addressKey('198.51.100.1')).toBe('198.51.100.1');
    expect(addressKey('::ffff:198.51.100.1')).toBe('198.51.100.1');
    expect(addressKey('198.51.100.1:5678')).toBe('198.51.100.1');
    for (const spelling of ['2001:db8:1:2::9', '2001:DB8:0001:0002:ffff::1', '[2001:db8:1:2::9]:443', '2001:db8:1:2:3:4:5:6', 'fe80::1%eth0'.replace('fe80::1', '2001:db8:1:2::1')]) {
      expect(addressKey(spelling)).toBe('2001:db8:1:2::/64');
    }
    expect(addressKey('2001:db8:1:3::9')).not.toBe(addressKey('2001:db8:1:2::9'));
  });
});

describe(`rate limits (counters in memory, store ${driver})`, () => {
  let h: Harness;
  let t: Tenant;
  let api: Client;

  beforeEach(async () => {
    await h?.close();
    h = await createHarness(driver!);
    t = await seedTenant(h.services);
    api = client(h.app);
    // Start at the beginning of a window so Retry-After is predictable.
    await h.clock.advance(60_000 - (h.clock.now() % 60_000));
  });
  afterAll(() => h.close());

  it('refuses the 301st server-key request from one IP in a minute, with Retry-After', async () => {
    const get = (ip = '198.51.100.1') => api.get('/calls/ci_unknown', { auth: t.serverKey, ip });
    await burst(300, () => get());
    await h.clock.advanceSeconds(20);
    const refused = await expectError(get(), 429, 'rate_limited');
    expect(refused.headers['retry-after']).toBe('40');
    expect((await get('198.51.100.2')).status).toBe(404);
    await h.clock.advanceSeconds(40);
    expect((await get()).status).toBe(404);
  });

  it('keeps every limit at one request or more however small C2C_RATE_LIMIT_SCALE is (a limit of 0 would refuse everyone)', async () => {
    const tiny = await createHarness(driver!, { rateLimitScale: 0.0001 });
    try {
      const key = (await seedTenant(tiny.services)).serverKey;
      const get = () => client(tiny.app).get('/calls/ci_unknown', { auth: key, ip: '198.51.100.9' });
      expect((await get()).status).toBe(404);
      await expectError(get(), 429, 'rate_limited');
    } finally {
      await tiny.close();
    }
  });

  it('counts an IPv6 client by its /64 (rotating addresses inside it gets no fresh budget), and IPv4-mapped as IPv4', async () => {
    let host = 0;
    const get = (ip: string) => api.get('/calls/ci_unknown', { auth: t.serverKey, ip });
    await burst(300, () => get(`2001:db8:5:6:${(host++).toString(16)}::1`));
    await expectError(get('2001:db8:5:6:ffff:ffff:ffff:ffff'), 429, 'rate_limited');
    expect((await get('2001:db8:5:7::1')).status).toBe(404); // the next /64 is another subscriber
    await h.clock.advanceSeconds(60); // a new window (the integration's own 600 would be next)
    await burst(300, () => get('::ffff:198.51.100.77'));
    await expectError(get('198.51.100.77'), 429, 'rate_limited');
  });

  it('refuses the 601st request of one integration in a minute, whatever the IPs', async () => {
    let ip = 0;
    const get = () => api.get('/calls/ci_unknown', { auth: t.serverKey, ip: `198.51.100.${(ip++ % 4) + 10}` });
    await burst(600, get);
    const refused = await expectError(get(), 429, 'rate_limited');
    expect(Number(refused.headers['retry-after'])).toBe(60);
  });

  it('counts unauthenticated requests per IP too', async () => {
    await burst(300, () => api.get('/calls/ci_x', { auth: 'c2ck_bad', ip: '198.51.100.9' }));
    await expectError(api.get('/calls/ci_x', { auth: 'c2ck_bad', ip: '198.51.100.9' }), 429, 'rate_limited');
  });

  it('refuses the 601st widget request from one IP in a minute', async () => {
    const session = await api.post('/sessions', { integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, origin: ORIGIN }, { auth: t.serverKey });
    const token = session.body.widget_token as string;
    const poll = () => api.get('/widget/state', { auth: token, origin: ORIGIN, ip: '198.51.100.50' });
    await burst(600, poll);
    const refused = await expectError(poll(), 429, 'rate_limited');
    expect(refused.headers['retry-after']).toBe('60');
    await h.clock.advanceSeconds(60);
    expect((await poll()).status).toBe(200);
  });
});

describe('a request whose client left before its address was read', () => {
  it('goes on to its credential check (Node has no address for a closed connection it never asked), not to a 500', async () => {
    const h = await createHarness(driver!);
    try {
      await h.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = h.app.server.address() as AddressInfo;
      const serverSide = new Promise<void>((resolve) => h.app.server.once('connection', (socket: Socket) => socket.once('close', () => resolve())));
      // The platform switch is read first (from the store when its cache is cold): the client goes meanwhile.
      const { platform, sessions } = h.services;
      const assertEnabled = platform.assertEnabled.bind(platform);
      platform.assertEnabled = async () => {
        await serverSide;
        return assertEnabled();
      };
      let checked = false;
      const authenticate = sessions.authenticate.bind(sessions);
      sessions.authenticate = (...args) => ((checked = true), authenticate(...args));
      const client = connect(port, '127.0.0.1', () => {
        client.end(`GET ${API_PREFIX}/widget/state HTTP/1.1\r\nHost: c2c.test\r\nOrigin: ${ORIGIN}\r\nAuthorization: Bearer c2cw_gone\r\n\r\n`);
        client.destroy();
      });
      await vi.waitFor(() => expect(checked).toBe(true), SETTLE);
    } finally {
      await h.close();
    }
  });
});

describe("widget commands over the socket, counted by the client's address", () => {
  // 600 a minute scaled down to 3, so that a few commands reach the limit
  const scale = 3 / 600;
  /**
   * Browsers behind a proxy at 127.0.0.1 (one connection address), one socket per X-Forwarded-For;
   * `plan` names the socket of each command in turn. Returns each command's answer.
   */
  const commandsFrom = async (trustProxy: TrustProxy, forwardedFor: string[], plan: number[]) => {
    const live = await createGatewayHarness(driver!, { trustProxy, rateLimitScale: scale });
    const t = await seedTenant(live.h.services);
    const agent = await readyAgent(client(live.h.app), t);
    const sockets = forwardedFor.map((header) => openSocket(live.url, agent.widgetToken, ORIGIN, { headers: { 'x-forwarded-for': header } }));
    try {
      await Promise.all(sockets.map((socket) => socket.next('state')));
      const answers: unknown[] = [];
      for (const [n, index] of plan.entries()) {
        answers.push(await request(sockets[index]!.socket, 'command', { kind: 'availability', request_id: `ip-${index}-${n}`, available: n % 2 === 0 }));
      }
      return answers;
    } finally {
      for (const socket of sockets) socket.close();
      await live.close();
    }
  };
  const ok = expect.objectContaining({ ok: true });
  const limited = expect.objectContaining({ ok: false, error: 'rate_limited' });

  it('behind a trusted proxy, by the X-Forwarded-For entry, as on REST', async () => {
    const answers = await commandsFrom(true, ['198.51.100.61, 10.0.0.2', '198.51.100.62, 10.0.0.2'], [0, 0, 0, 0, 1]);
    expect(answers).toEqual([ok, ok, ok, limited, ok]);
  });

  it("behind listed proxies, by the entry the proxy vouches for, not what the client wrote left of it", async () => {
    // sockets 0 and 1: one client pretending to be two; socket 2: another client claiming the same as socket 0
    const answers = await commandsFrom(['loopback'], ['203.0.113.1, 198.51.100.61', '203.0.113.2, 198.51.100.61', '203.0.113.1, 198.51.100.62'], [0, 1, 0, 1, 2]);
    expect(answers).toEqual([ok, ok, ok, limited, ok]);
  });

  it('otherwise by the connection, whatever the headers say', async () => {
    const answers = await commandsFrom(false, ['198.51.100.61, 10.0.0.2', '198.51.100.62, 10.0.0.2'], [0, 0, 0, 0, 1]);
    expect(answers).toEqual([ok, ok, ok, limited, limited]);
  });

  it("against one budget with the address's widget requests over REST", async () => {
    const live = await createGatewayHarness(driver!, { rateLimitScale: scale });
    const t = await seedTenant(live.h.services);
    const agent = await readyAgent(client(live.h.app), t);
    const socket = openSocket(live.url, agent.widgetToken, ORIGIN);
    try {
      await socket.next('state');
      // the socket's connection comes from 127.0.0.1: so do these polls
      const poll = () => client(live.h.app).get('/widget/state', { auth: agent.widgetToken, origin: ORIGIN, ip: '127.0.0.1' });
      const command = (n: number) => request(socket.socket, 'command', { kind: 'availability', request_id: `shared-${n}`, available: n % 2 === 0 });
      expect((await poll()).status).toBe(200);
      expect((await poll()).status).toBe(200);
      expect(await command(1)).toEqual(ok);
      expect(await command(2)).toEqual(limited);
      await expectError(poll(), 429, 'rate_limited');
    } finally {
      socket.close();
      await live.close();
    }
  });
});

describe.each(storeDrivers())('socket handshakes and engine requests, against the limits REST counts, on %s', (store) => {
  // 600 a minute, per address and per engine, scaled down to 3
  const scale = 3 / 600;
  let live: GatewayHarness;
  let api: Client;
  let agent: Agent;
  let agentMember: string;
  const sockets: TestSocket[] = [];
  const from = (address: string, token: string, origin = ORIGIN) => {
    const socket = openSocket(live.url, token, origin, { headers: { 'x-forwarded-for': address } });
    sockets.push(socket);
    return socket;
  };
  /** Moves the clock to the start of the next window, plus `seconds`. */
  const nextWindow = (seconds = 0) => live.h.clock.advance(60_000 - (live.h.clock.now() % 60_000) + seconds * 1000);

  beforeEach(async () => {
    live = await createGatewayHarness(store, { trustProxy: true, rateLimitScale: scale });
    api = client(live.h.app);
    const tenant = await seedTenant(live.h.services);
    agentMember = tenant.agent.id;
    agent = await readyAgent(api, tenant);
    await nextWindow();
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    for (const socket of sockets.splice(0)) socket.close();
    await live.close();
  });

  const madeUp = (prefix: 'c2cw_' | 'c2ce_', fill = 'x') => prefix + fill.repeat(48);

  it('count refused handshakes per address; past the limit the address is refused before any token is read, until the window ends', async () => {
    const [a, b, c] = ['198.51.100.71', '198.51.100.72', '198.51.100.74'];
    // Handshakes that pass do not count: a call centre's agents share an address and reconnect together.
    for (let n = 0; n < 5; n += 1) await from(a, agent.widgetToken).next('state');
    // Nor does REST's traffic block them: this address is over its widget limit on REST.
    for (let n = 0; n < 3; n += 1) expect((await api.get('/widget/state', { auth: agent.widgetToken, origin: ORIGIN, headers: { 'x-forwarded-for': c } })).status).toBe(200);
    await expectError(api.get('/widget/state', { auth: agent.widgetToken, origin: ORIGIN, headers: { 'x-forwarded-for': c } }), 429, 'rate_limited');
    await from(c, agent.widgetToken).next('state');
    // Every kind of refusal counts; the one that goes over the limit is still answered for what it is.
    expect(await from(a, madeUp('c2cw_')).next('connect_error')).toMatchObject({ code: 'unauthorized', final: true });
    expect(await from(a, agent.widgetToken, 'https://evil.example').next('connect_error')).toMatchObject({ code: 'origin_not_allowed', final: true });
    expect(await from(a, agent.engineToken, ORIGIN).next('connect_error')).toMatchObject({ code: 'origin_not_allowed', final: true });
    expect(await from(a, madeUp('c2ce_'), live.h.config.siteUrl).next('connect_error')).toMatchObject({ code: 'unauthorized', final: true });
    await live.h.clock.advanceSeconds(20);
    // Now even a good token from that address is refused, unread, with a retry reason and the time to wait.
    const widgetChecks = vi.spyOn(live.h.services.sessions, 'authenticate');
    const engineChecks = vi.spyOn(live.h.services.engines, 'authenticate');
    expect(await from(a, agent.widgetToken).next('connect_error')).toEqual({ code: 'rate_limited', final: false, message: expect.any(String), retry_after: 40 });
    expect(await from(a, agent.engineToken, live.h.config.siteUrl).next('connect_error')).toMatchObject({ code: 'rate_limited', retry_after: 40 });
    expect(widgetChecks).not.toHaveBeenCalled();
    expect(engineChecks).not.toHaveBeenCalled();
    // Its REST requests are not refused for it, and another address is not affected.
    expect((await api.get('/widget/state', { auth: agent.widgetToken, origin: ORIGIN, headers: { 'x-forwarded-for': a } })).status).toBe(200);
    await from(b, agent.widgetToken).next('state');
    await live.h.clock.advanceSeconds(40);
    await from(a, agent.widgetToken).next('state');
    const refusals = await live.h.services.metrics.registry.getSingleMetricAsString('c2c_socket_refusals_total');
    expect(refusals).toContain('c2c_socket_refusals_total{code="unauthorized"} 2');
    expect(refusals).toContain('c2c_socket_refusals_total{code="origin_not_allowed"} 2');
    expect(refusals).toContain('c2c_socket_refusals_total{code="rate_limited"} 2');
  });

  it('refuse, unread, a handshake from an address with too many being checked or counted already', async () => {
    // scaled down to 1 in flight per address; widget token checks, and the counting of refused
    // handshakes, wait until the test lets them go
    const gate = () => {
      let open!: () => void;
      const opened = new Promise<void>((resolve) => (open = resolve));
      return { open, opened };
    };
    const [checks, counts] = [gate(), gate()];
    const { sessions, counter } = live.h.services;
    const authenticate = sessions.authenticate.bind(sessions);
    const widgetChecks = vi.spyOn(sessions, 'authenticate').mockImplementation(async (...args) => {
      await checks.opened;
      return authenticate(...args);
    });
    const hit = counter.hit.bind(counter);
    vi.spyOn(counter, 'hit').mockImplementation(async (key, ...rest) => {
      if (key.startsWith('refused-ip:')) await counts.opened;
      return hit(key, ...rest);
    });
    const [d, e] = ['198.51.100.75', '198.51.100.76'];
    const first = from(d, madeUp('c2cw_', 'y'));
    await vi.waitFor(() => expect(widgetChecks).toHaveBeenCalledTimes(1), SETTLE);
    expect(await from(d, madeUp('c2cw_', 'z')).next('connect_error')).toEqual({ code: 'rate_limited', final: false, message: expect.any(String), retry_after: 1 });
    const held = from(d, agent.engineToken, live.h.config.siteUrl);
    expect(await held.next('connect_error')).toMatchObject({ code: 'rate_limited', retry_after: 1 });
    expect(widgetChecks).toHaveBeenCalledTimes(1);
    await from(e, agent.engineToken, live.h.config.siteUrl).next('work');
    checks.open();
    expect(await first.next('connect_error')).toMatchObject({ code: 'unauthorized', final: true });
    // refused, and not counted yet: still in flight
    expect(await from(d, agent.widgetToken).next('connect_error')).toMatchObject({ code: 'rate_limited', retry_after: 1 });
    counts.open();
    await vi.waitFor(async () => {
      const next = from(d, agent.widgetToken);
      expect(await Promise.race([next.next('state').then(() => 'in'), next.next('connect_error').then(() => 'refused')])).toBe('in');
    }, SETTLE);
    // A client told to retry does so on a new connection (one handshake per connection), and gets in.
    held.socket.connect();
    await held.next('work');
  });

  it("leave REST's engine routes open to an address whose handshakes are refused: its windows go on heartbeating there", async () => {
    const [h, i] = ['198.51.100.79', '198.51.100.80'];
    const beat = (token: string, address: string) => api.post('/engine/heartbeat', READY, { auth: token, headers: { 'x-forwarded-for': address } });
    // made-up engine tokens on REST are refused one by one, and count for nothing here
    for (let n = 0; n < 4; n += 1) await expectError(beat(madeUp('c2ce_', String(n)), h), 401, 'unauthorized');
    await from(h, agent.engineToken, live.h.config.siteUrl).next('work');
    for (let n = 0; n < 4; n += 1) expect(await from(h, madeUp('c2cw_', String(n))).next('connect_error')).toMatchObject({ code: 'unauthorized' });
    expect(await from(h, agent.engineToken, live.h.config.siteUrl).next('connect_error')).toMatchObject({ code: 'rate_limited' });
    expect((await beat(agent.engineToken, h)).status).toBe(200);
    expect((await beat(agent.engineToken, i)).status).toBe(200);
  });

  it('do not count good tokens refused by policy: a disabled member, the platform switch', async () => {
    const g = '198.51.100.78';
    const deps = { db: live.h.services.db, bus: live.h.services.bus, clock: live.h.services.clock };
    await updateMember(deps, agentMember, { enabled: false });
    for (let n = 0; n < 2; n += 1) expect(await from(g, agent.widgetToken).next('connect_error')).toMatchObject({ code: 'agent_disabled' });
    await expectError(api.post('/engine/heartbeat', READY, { auth: agent.engineToken, headers: { 'x-forwarded-for': g } }), 403, 'agent_disabled');
    await updateMember(deps, agentMember, { enabled: true });
    await live.h.services.platform.setDisabled(true);
    for (let n = 0; n < 2; n += 1) expect(await from(g, agent.widgetToken).next('connect_error')).toMatchObject({ code: 'platform_disabled' });
    await live.h.services.platform.setDisabled(false);
    // the limit of 3 is all there: three refusals, and a good token still passes
    for (let n = 0; n < 3; n += 1) expect(await from(g, madeUp('c2cw_')).next('connect_error')).toMatchObject({ code: 'unauthorized' });
    await from(g, agent.widgetToken).next('state');
  });

  it('make no second socket on a connection that carried one (it closes when its socket leaves), and count it against no one', async () => {
    const f = '198.51.100.77';
    const ws = new WebSocket(`${live.url.replace(/^http/, 'ws')}/socket.io/?EIO=4&transport=websocket`, { headers: { origin: ORIGIN, 'x-forwarded-for': f } });
    const frames: string[] = [];
    ws.on('message', (data) => frames.push(String(data)));
    const closed = new Promise((resolve) => ws.on('close', resolve));
    await new Promise((resolve) => ws.on('open', resolve));
    // the Socket.IO protocol by hand: CONNECT with a good token, DISCONNECT, then CONNECT again on the same connection
    ws.send(`40${JSON.stringify({ token: agent.widgetToken })}`);
    await vi.waitFor(() => expect(frames.some((frame) => frame.startsWith('40{"sid"'))).toBe(true), SETTLE);
    ws.send('41');
    ws.send(`40${JSON.stringify({ token: madeUp('c2cw_') })}`);
    await closed;
    expect(frames.filter((frame) => frame.startsWith('40{"sid"'))).toHaveLength(1); // the second CONNECT made nothing
    // Counted against neither the client nor the proxy in front (whose address the request, gone, would have left):
    // three refusals from each stay under the limit of 3, so a good token still passes.
    for (const address of [f, undefined]) {
      for (let n = 0; n < 3; n += 1) {
        const socket = openSocket(live.url, madeUp('c2cw_'), ORIGIN, address ? { headers: { 'x-forwarded-for': address } } : {});
        sockets.push(socket);
        expect(await socket.next('connect_error')).toMatchObject({ code: 'unauthorized' });
      }
      const good = openSocket(live.url, agent.widgetToken, ORIGIN, address ? { headers: { 'x-forwarded-for': address } } : {});
      sockets.push(good);
      await good.next('state');
    }
  });

  it("count an engine's reconnections with its heartbeats: a window reconnecting in a loop is refused, its work unread, until the window ends", async () => {
    const address = '198.51.100.81';
    const work = vi.spyOn(live.h.services.pusher, 'engineWork');
    // the first connection costs nothing (a window opening, or every window after a gateway restart); each one after its socket closed counts
    for (let n = 0; n < 4; n += 1) {
      const engine = from(address, agent.engineToken, live.h.config.siteUrl);
      await engine.next('work');
      engine.close();
      await vi.waitFor(() => expect(live.h.services.bus.io.of('/').sockets.size).toBe(0), SETTLE);
    }
    expect(work).toHaveBeenCalledTimes(4);
    const refused = await from(address, agent.engineToken, live.h.config.siteUrl).next('connect_error');
    expect(refused).toEqual({ code: 'rate_limited', final: false, message: expect.any(String), retry_after: expect.any(Number) });
    expect(work).toHaveBeenCalledTimes(4);
    // the same budget as its REST requests, which are refused now too
    await expectError(heartbeat(api, agent.engineToken), 429, 'rate_limited');
    // the address is not held back for it: another agent's widget there connects
    await from(address, agent.widgetToken).next('state');
    await nextWindow();
    await from(address, agent.engineToken, live.h.config.siteUrl).next('work');
  });

  it("count an engine's heartbeats over the socket with its REST requests, and its acks on a budget of their own", async () => {
    const engine = from('198.51.100.73', agent.engineToken, live.h.config.siteUrl);
    await engine.next('work');
    // a flood of acks is refused past its budget, and leaves the heartbeats alone
    for (let n = 0; n < 3; n += 1) expect(await request(engine.socket, 'ack', [])).toEqual({ ok: true });
    expect(await request(engine.socket, 'ack', [])).toEqual({ ok: false, error: 'rate_limited', message: expect.any(String), retry_after: expect.any(Number) });
    // counted before it is read: a malformed one past the budget costs no parsing either
    expect(await request(engine.socket, 'ack', 'x'.repeat(60_000))).toMatchObject({ ok: false, error: 'rate_limited' });
    // its first connection costs nothing (below): one on REST and two on the socket
    expect((await heartbeat(api, agent.engineToken)).status).toBe(200);
    expect(await request(engine.socket, 'heartbeat', { ...READY, acks: [] })).toMatchObject({ ok: true });
    expect(await request(engine.socket, 'heartbeat', { ...READY, acks: [] })).toMatchObject({ ok: true });
    // refused as REST refuses it, with what REST sends as Retry-After
    const refused = await request(engine.socket, 'heartbeat', { ...READY, acks: [] });
    expect(refused).toEqual({ ok: false, error: 'rate_limited', message: expect.any(String), retry_after: expect.any(Number) });
    const overRest = await expectError(heartbeat(api, agent.engineToken), 429, 'rate_limited');
    expect(refused.retry_after).toBe(Number(overRest.headers['retry-after']));
    expect(refused.retry_after).toBeGreaterThan(0);
    await nextWindow();
    expect(await request(engine.socket, 'heartbeat', { ...READY, acks: [] })).toMatchObject({ ok: true });
    expect(await request(engine.socket, 'ack', [])).toEqual({ ok: true });
  });
});

describe('REST behind listed proxies', () => {
  it('counts a client by the address the proxy vouches for, however it varies what it writes itself', async () => {
    const h = await createHarness(driver!, { trustProxy: ['10.0.0.0/8'] });
    try {
      const t = await seedTenant(h.services);
      const api = client(h.app);
      // through the proxy at 10.0.0.2, the client at 198.51.100.70 writing a new X-Forwarded-For each time
      const get = (n: number, client = '198.51.100.70') =>
        api.get('/calls/ci_x', { auth: t.serverKey, ip: '10.0.0.2', headers: { 'x-forwarded-for': `192.0.2.${n % 250}, ${client}` } });
      await burst(300, (n) => get(n));
      await expectError(get(300), 429, 'rate_limited');
      expect((await get(301, '198.51.100.71')).status).toBe(404);
    } finally {
      await h.close();
    }
  });
});

describe.skipIf(!redisUrl())('rate limits shared across nodes through Redis', () => {
  it('counts requests to two nodes against one per-IP window', async () => {
    const database = await openTestDatabase(driver!);
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 9, 0, 0) + Math.floor(Math.random() * 1e6) * 60_000);
    const a = await createHarness(driver!, {}, { database, clock, redisCounterUrl: redisUrl() });
    const b = await createHarness(driver!, {}, { database, clock, redisCounterUrl: redisUrl() });
    const t = await seedTenant(a.services);
    const ip = `198.51.100.${Math.floor(Math.random() * 200) + 20}`;
    const get = (node: Harness) => client(node.app).get('/calls/ci_unknown', { auth: t.serverKey, ip });
    for (let i = 0; i < 150; i += 1) {
      expect((await get(a)).status).toBe(404);
      expect((await get(b)).status).toBe(404);
    }
    await expectError(get(b), 429, 'rate_limited');
    await expectError(get(a), 429, 'rate_limited');
    await a.close();
    await b.close();
    await database.drop();
  });
});

describe.skipIf(!redisUrl())('rate limits while the counters\' Redis is down', () => {
  it('answers widget commands on REST and on the socket alike, counting nothing', async () => {
    const port = await freePort();
    const redis = spawnRedis(port);
    await redis.start();
    const live = await createGatewayHarness(driver!, {}, { redisCounterUrl: `redis://127.0.0.1:${port}` });
    const api = client(live.h.app);
    const t = await seedTenant(live.h.services);
    const agent = await readyAgent(api, t);
    const widget = openSocket(live.url, agent.widgetToken, ORIGIN);
    try {
      await widget.next('state');
      await redis.stop();
      const rest = await command(api, agent.widgetToken, { kind: 'availability', request_id: 'redis-down-rest', available: false });
      expect(rest.body).toMatchObject({ ok: true, status: 'done' });
      const socket = await request(widget.socket, 'command', { kind: 'availability', request_id: 'redis-down-socket', available: true });
      expect(socket).toMatchObject({ ok: true, status: 'done' });
    } finally {
      widget.close();
      await live.close();
      await redis.stop();
    }
  });
});
