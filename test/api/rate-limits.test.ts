/**
 * Rate limits (spec section 8) with a clock the test controls: 300/min per IP and 600/min per
 * integration on server-key endpoints, 600/min per IP on widget endpoints, 429 rate_limited with
 * Retry-After counting down to the end of the window.
 */
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { redisUrl, storeDrivers } from '../helpers/env.js';
import { openTestDatabase } from '../helpers/databases.js';
import { ManualClock } from '../../api/clock.js';
import { expectError } from '../helpers/expect.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';
import { command, readyAgent } from '../helpers/flows.js';
import { createGatewayHarness } from '../helpers/gateway.js';
import { freePort, spawnRedis } from '../helpers/processes.js';
import { openSocket, request } from '../helpers/sockets.js';

const [driver] = storeDrivers();

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

  const burst = async (n: number, send: () => Promise<{ status: number }>) => {
    for (let i = 0; i < n; i += 1) {
      const r = await send();
      expect(r.status).not.toBe(429);
    }
  };

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

describe("widget commands over the socket, counted by the client's address", () => {
  // 600 a minute scaled down to 3, so that a few commands reach the limit
  const scale = 3 / 600;
  const commandsFrom = async (trustProxy: boolean) => {
    const live = await createGatewayHarness(driver!, { trustProxy, rateLimitScale: scale });
    const t = await seedTenant(live.h.services);
    const agent = await readyAgent(client(live.h.app), t);
    // two browsers behind the same proxy: one connection address, two X-Forwarded-For
    const sockets = ['198.51.100.61', '198.51.100.62'].map((ip) => openSocket(live.url, agent.widgetToken, ORIGIN, { headers: { 'x-forwarded-for': `${ip}, 10.0.0.2` } }));
    try {
      await Promise.all(sockets.map((socket) => socket.next('state')));
      const send = (socket: (typeof sockets)[number], n: number) =>
        request(socket.socket, 'command', { kind: 'availability', request_id: `ip-${trustProxy}-${socket.socket.id}-${n}`, available: n % 2 === 0 });
      const first: unknown[] = [];
      for (let n = 0; n < 4; n += 1) first.push(await send(sockets[0]!, n));
      return { first, second: await send(sockets[1]!, 0) };
    } finally {
      for (const socket of sockets) socket.close();
      await live.close();
    }
  };

  it('behind a trusted proxy, by the first X-Forwarded-For entry, as on REST', async () => {
    const { first, second } = await commandsFrom(true);
    expect(first.slice(0, 3)).toEqual(Array(3).fill(expect.objectContaining({ ok: true })));
    expect(first[3]).toMatchObject({ ok: false, error: 'rate_limited' });
    expect(second).toMatchObject({ ok: true });
  });

  it('otherwise by the connection, whatever the headers say', async () => {
    const { first, second } = await commandsFrom(false);
    expect(first[3]).toMatchObject({ ok: false, error: 'rate_limited' });
    expect(second).toMatchObject({ ok: false, error: 'rate_limited' });
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
