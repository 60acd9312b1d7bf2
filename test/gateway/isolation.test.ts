/**
 * A gateway cut off from both Redis and the database lets its sockets go and refuses handshakes
 * until either is back (gateway/isolation.ts); one cut off from only one of them, or whose pool is
 * merely exhausted, keeps them. Two nodes on one PostgreSQL database and a Redis server of the
 * test's own: node A takes REST requests, node B holds the sockets and reaches PostgreSQL through a
 * TCP proxy the test cuts (a network partition), on a pool of one connection the test can hold.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRedisBus } from '../../api/bus/redis.js';
import type { Bus } from '../../api/bus/index.js';
import { ManualClock } from '../../api/clock.js';
import { openPg } from '../../api/store/pg.js';
import type { Db } from '../../api/store/index.js';
import { LIMITS } from '../../shared/limits.js';
import { ISOLATED, ISOLATED_AFTER_PROBES, ISOLATED_FOR_MS } from '../../gateway/isolation.js';
import { openTestDatabase, type TestDatabase } from '../helpers/databases.js';
import { redisUrl, storeDrivers } from '../helpers/env.js';
import { readyAgent, type Agent } from '../helpers/flows.js';
import { createGatewayHarness, type GatewayHarness } from '../helpers/gateway.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { freePort, spawnRedis, waitFor } from '../helpers/processes.js';
import { advanceUntilEnded, openSocket, snapshotOf, type TestSocket } from '../helpers/sockets.js';
import { ORIGIN, seedTenant } from '../helpers/tenant.js';
import { tcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/** How long node B's statements wait for its one connection before they fail as out of reach. */
const CONNECT_TIMEOUT_MS = 500;

describe.skipIf(!redisUrl() || !storeDrivers().includes('pg'))('a gateway cut off from Redis and the store (needs PostgreSQL and Redis)', () => {
  let redis: ReturnType<typeof spawnRedis>;
  let database: TestDatabase;
  let bDb: Db;
  /** node B's way to PostgreSQL */
  let network: TcpProxy;
  let buses: Bus[];
  let a: Harness;
  let b: GatewayHarness;
  let clock: ManualClock;
  let api: Client;
  let agent: Agent;
  const sockets: TestSocket[] = [];
  /** lets go of node B's connection, if held */
  let release = () => {};

  const busesAre = (state: 'up' | 'down') => waitFor(async () => (buses.every((bus) => bus.state() === state) ? true : undefined), `both buses ${state}`, 20_000);
  const open = (token: string, origin: string) => {
    const socket = openSocket(b.url, token, origin);
    sockets.push(socket);
    return socket;
  };
  /** Exhausts node B's pool: its one connection is held, and its statements fail as out of reach. */
  const holdBPool = async () => {
    void bDb.tx(() => new Promise<void>((resolve) => (release = resolve)));
    await expect(bDb.query('SELECT 1')).rejects.toMatchObject({ code: 'service_unavailable', outOfReach: true });
  };
  /** Cuts node B off from PostgreSQL. */
  const cutBStore = async () => {
    network.cut = true;
    await expect(bDb.query('SELECT 1')).rejects.toMatchObject({ code: 'service_unavailable', outOfReach: true });
  };
  /** Moves the clock on in poll_ms steps (each waits for the node's probes and catch-ups on it). */
  const ride = async (ms: number) => {
    for (let passed = 0; passed < ms; passed += LIMITS.pollMs) await clock.advance(LIMITS.pollMs);
  };

  beforeEach(async () => {
    const port = await freePort();
    redis = spawnRedis(port);
    await redis.start();
    database = await openTestDatabase('pg');
    clock = new ManualClock();
    // the Redis connections' liveness probes run on a clock of their own, which the test leaves alone
    const probes = new ManualClock();
    buses = [await createRedisBus(`redis://127.0.0.1:${port}`, clock, probes), await createRedisBus(`redis://127.0.0.1:${port}`, clock, probes)];
    a = await createHarness('pg', {}, { database, bus: buses[0], clock });
    a.services.pusher.start();
    network = await tcpProxy(database.url!);
    bDb = await openPg(network.url, { max: 1, connectTimeoutMs: CONNECT_TIMEOUT_MS });
    b = await createGatewayHarness('pg', {}, { database: { db: bDb, url: network.url, drop: async () => {} }, bus: buses[1], clock });
    api = client(a.app);
    agent = await readyAgent(api, await seedTenant(a.services));
  });

  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.close();
    release();
    await b.close();
    await a.close();
    await bDb.close();
    await network.close();
    for (const bus of buses) await bus.close();
    await database.drop();
    await redis.stop();
  });

  it('ends every socket with a retry reason once cut off from both for ISOLATED_FOR_MS, refuses handshakes alike, without reading the store, until it answers, then takes them again', async () => {
    const w = open(agent.widgetToken, ORIGIN);
    const e = open(agent.engineToken, b.h.config.siteUrl);
    await snapshotOf(w);
    await e.next('work');
    await redis.stop();
    await busesAre('down');
    await cutBStore();
    const cutOffAt = clock.now();
    const wEnded = w.next('ended', { timeoutMs: 60_000 });
    const ending = await advanceUntilEnded(clock, e, LIMITS.pollMs, 20, 2000);
    // the first probe after the cut found nothing, a poll_ms on; the ending came ISOLATED_FOR_MS after that
    const probes = 1 + Math.ceil(ISOLATED_FOR_MS / LIMITS.pollMs);
    expect(probes).toBeGreaterThanOrEqual(ISOLATED_AFTER_PROBES);
    expect(clock.now() - cutOffAt).toBe(probes * LIMITS.pollMs);
    expect(ending).toEqual(ISOLATED);
    expect(ending).toMatchObject({ code: 'service_unavailable', final: false, retry_after: 5 });
    expect(await wEnded).toEqual(ISOLATED);
    await waitFor(async () => (!w.socket.connected && !e.socket.connected ? true : undefined), 'both sockets closed');
    expect(await (await fetch(`${b.url}/metrics`)).text()).toMatch(/^c2c_socket_isolated_endings_total 2$/m);

    // A handshake meanwhile is refused alike, without reading the store (which would refuse it
    // service_unavailable with its own message and retry_after, after a wait).
    const refused = open(agent.widgetToken, ORIGIN);
    expect(await refused.next('connect_error')).toEqual(ISOLATED);

    // The store answers again (Redis still away): the next probe lifts it, and handshakes pass.
    network.cut = false;
    await clock.advance(LIMITS.pollMs);
    const back = open(agent.widgetToken, ORIGIN);
    expect(await snapshotOf(back)).toMatchObject({ version: expect.any(Number) });
  }, 120_000);

  it('keeps its sockets while cut off from only Redis (its pool merely exhausted: the server still answers) or only the store (pushes come through Redis)', async () => {
    const w = open(agent.widgetToken, ORIGIN);
    const e = open(agent.engineToken, b.h.config.siteUrl);
    await snapshotOf(w);
    await e.next('work');

    await cutBStore();
    await ride(ISOLATED_FOR_MS * 2);
    expect([w.socket.connected, e.socket.connected]).toEqual([true, true]);
    network.cut = false;

    await redis.stop();
    await busesAre('down');
    await holdBPool();
    await ride(ISOLATED_FOR_MS * 2);
    expect([w.socket.connected, e.socket.connected]).toEqual([true, true]);
    expect([...w.events, ...e.events].some((event) => event.event === 'ended')).toBe(false);
  }, 120_000);
});
