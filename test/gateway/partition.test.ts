/**
 * A node cut off from Redis while the other nodes are not (api/domain/push-debt.ts). Node A (an API
 * node) reaches Redis through a proxy the test cuts (no byte passes, as on a network that drops
 * packets: A's liveness probes notice); node B (a gateway holding the sockets) keeps
 * its own link, so its bus stays up and its outage catch-up does not run. A's changes reach B's
 * sockets through the store's count of what A could not announce.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRedisBus } from '../../api/bus/redis.js';
import type { Bus } from '../../api/bus/index.js';
import { ManualClock } from '../../api/clock.js';
import { PROBE_EVERY_MS, SILENT_AFTER_MS } from '../../api/redis-liveness.js';
import { LIMITS } from '../../shared/limits.js';
import { openTestDatabase, type TestDatabase } from '../helpers/databases.js';
import { redisUrl, storeDrivers } from '../helpers/env.js';
import { command, openSession, readyAgent, widgetState, type Agent } from '../helpers/flows.js';
import { createGatewayHarness, type GatewayHarness } from '../helpers/gateway.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { freePort, spawnRedis, waitFor } from '../helpers/processes.js';
import { openSocket, snapshotOf, type TestSocket } from '../helpers/sockets.js';
import { tcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';

describe.skipIf(!redisUrl()).each(storeDrivers())('a node cut off from Redis while the others are not, on %s', (driver) => {
  let redis: ReturnType<typeof spawnRedis>;
  let proxy: TcpProxy;
  let database: TestDatabase;
  /** A's bus, the one cut off, and B's */
  let cutOff: Bus;
  let connected: Bus;
  let a: Harness;
  let b: GatewayHarness;
  let clock: ManualClock;
  /** the clock of A's Redis connections' liveness probes (B's have one of their own, which stands still) */
  let probesA: ManualClock;
  let api: Client;
  let t: Tenant;
  let agent: Agent;
  const sockets: TestSocket[] = [];

  const busIs = (bus: Bus, state: 'up' | 'down') => waitFor(async () => (bus.state() === state ? true : undefined), `the bus ${state}`, 20_000);
  const open = (token: string, origin: string) => {
    const socket = openSocket(b.url, token, origin);
    sockets.push(socket);
    return socket;
  };

  beforeEach(async () => {
    const port = await freePort();
    redis = spawnRedis(port);
    await redis.start();
    proxy = await tcpProxy(`redis://127.0.0.1:${port}`);
    database = await openTestDatabase(driver);
    clock = new ManualClock();
    probesA = new ManualClock();
    cutOff = await createRedisBus(proxy.url, clock, probesA);
    connected = await createRedisBus(`redis://127.0.0.1:${port}`, clock, new ManualClock());
    a = await createHarness(driver, {}, { database, bus: cutOff, clock });
    a.services.pusher.start();
    b = await createGatewayHarness(driver, {}, { database, bus: connected, clock });
    api = client(a.app);
    t = await seedTenant(a.services);
    agent = await readyAgent(api, t);
  });

  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.close();
    await b.close();
    await a.close();
    for (const bus of [cutOff, connected]) await bus.close();
    await proxy.close();
    await database.drop();
    await redis.stop();
  });

  it("brings the other nodes' sockets and caches A's changes within poll_ms, from the store", async () => {
    const w = open(agent.widgetToken, ORIGIN);
    const first = await snapshotOf(w);
    const e = open(agent.engineToken, b.h.config.siteUrl);
    await e.next('work');
    const revokedToken = await openSession(api, t);
    const revoked = open(revokedToken, ORIGIN);
    await revoked.next('state');
    // B's API answers from its cached WidgetState, dropped by the bus message of every change.
    const bApi = client(b.h.app);
    expect((await widgetState(bApi, agent.widgetToken)).body).toMatchObject({ engine: { available: true } });

    proxy.cut = true;
    await probesA.advance(PROBE_EVERY_MS + SILENT_AFTER_MS);
    await busIs(cutOff, 'down');
    expect(connected.state()).toBe('up');
    expect((await command(api, agent.widgetToken, { kind: 'availability', request_id: 'away', available: false })).body).toMatchObject({ ok: true });
    const focus = await command(api, agent.widgetToken, { kind: 'focus', request_id: 'focus-cut' });
    expect(focus.body).toMatchObject({ ok: true, status: 'queued' });
    expect((await api.post('/widget/revoke', {}, { auth: revokedToken, origin: ORIGIN })).status).toBe(200);

    const away = w.next('state', { where: (state) => state.version > first.version, timeoutMs: 10_000 });
    const work = e.next('work', { where: (next) => next.commands.some((c: { command_id: number }) => c.command_id === focus.body.command_id), timeoutMs: 10_000 });
    const ended = revoked.next('ended', { timeoutMs: 10_000 });
    // Nothing of A's reached B through Redis: B's sockets and B's cache learn it from the store at B's next read.
    await clock.advance(LIMITS.pollMs);
    expect(await away).toMatchObject({ engine: { available: false } });
    expect(await work).toBeTruthy();
    expect(await ended).toMatchObject({ code: 'unauthorized', final: true });
    expect((await widgetState(bApi, agent.widgetToken)).body).toMatchObject({ engine: { available: false } });
    expect(connected.state()).toBe('up');
    // what an operator sees of it
    const missed = async (harness: Harness, event: string) => (await harness.services.metrics.missedChanges.get()).values.find((v) => v.labels.event === event)?.value ?? 0;
    expect(await missed(a, 'counted')).toBeGreaterThanOrEqual(1);
    expect(await missed(b.h, 'heard')).toBe(1);
    expect(await missed(b.h, 'counted')).toBe(0);

    proxy.cut = false;
    // a connection A opened during the cut lost its ready check: A's probes close it, and the next gets through
    await waitFor(async () => {
      if (cutOff.state() === 'up') return true;
      await probesA.advance(PROBE_EVERY_MS + SILENT_AFTER_MS);
      return undefined;
    }, "A's bus back", 30_000);
  }, 60_000);
});
