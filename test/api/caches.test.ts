/**
 * The bus-invalidated caches behind the hot paths (api/domain/bus-cache.ts, directory.ts,
 * widget-states.ts, platform.ts): reads are served from memory while nothing changed, a change on
 * the bus drops exactly what it affects, a load that overlapped a change is not kept, refusals are
 * never cached, and while the bus is down (changes could be missed) every read goes to the store.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus } from '../../api/bus/memory.js';
import { createRedisBus } from '../../api/bus/redis.js';
import { createBusCache } from '../../api/domain/bus-cache.js';
import { bumpAgentVersion } from '../../api/domain/agent-state.js';
import { createDirectory } from '../../api/domain/directory.js';
import { createPlatform } from '../../api/domain/platform.js';
import { createWidgetStates } from '../../api/domain/widget-states.js';
import { updateMember } from '../../api/domain/operator/accounts.js';
import { redisUrl, storeDrivers } from '../helpers/env.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { freePort, spawnRedis, waitFor } from '../helpers/processes.js';
import { seedTenant, type Tenant } from '../helpers/tenant.js';

describe('a bus cache', () => {
  const watched = (message: { type: string }) => message.type === 'member';
  const affects = (entry: { memberId: string }, message: { type: string; memberId?: string }) => message.memberId === entry.memberId;

  it('keeps a load, and drops it when a watched change names it', async () => {
    const bus = createMemoryBus();
    const cache = createBusCache(bus, watched, affects);
    await cache.load('a', async () => ({ memberId: 'mem_a' }));
    await cache.load('b', async () => ({ memberId: 'mem_b' }));
    bus.publish({ type: 'member', memberId: 'mem_a' });
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('b')).toEqual({ memberId: 'mem_b' });
    bus.publish({ type: 'resync' });
    expect(cache.get('b')).toBeUndefined();
    await bus.close();
  });

  it('uses a load that overlapped a change once, without keeping it', async () => {
    const bus = createMemoryBus();
    const cache = createBusCache(bus, watched, affects);
    let finish!: (value: { memberId: string }) => void;
    const loading = cache.load('a', () => new Promise<{ memberId: string }>((resolve) => (finish = resolve)));
    bus.publish({ type: 'member', memberId: 'mem_other' });
    finish({ memberId: 'mem_a' });
    expect(await loading).toEqual({ memberId: 'mem_a' });
    expect(cache.get('a')).toBeUndefined();
    await bus.close();
  });

  it('is not disturbed by messages it does not watch', async () => {
    const bus = createMemoryBus();
    const cache = createBusCache(bus, watched, () => true);
    let finish!: (value: { memberId: string }) => void;
    const loading = cache.load('a', () => new Promise<{ memberId: string }>((resolve) => (finish = resolve)));
    bus.publish({ type: 'engine', engineId: 'eng_1', reason: 'work' });
    finish({ memberId: 'mem_a' });
    await loading;
    bus.publish({ type: 'agent', integrationId: 'c2c_1', memberId: 'mem_a', version: 2 });
    expect(cache.get('a')).toEqual({ memberId: 'mem_a' });
    await bus.close();
  });
});

describe.skipIf(!redisUrl())('caches on a Redis bus that goes down', () => {
  it('serves nothing from memory while the bus is down (changes could be missed), and caches again after', async () => {
    const port = await freePort();
    const own = spawnRedis(port);
    await own.start();
    const bus = await createRedisBus(`redis://127.0.0.1:${port}`);
    try {
      const cache = createBusCache(bus, (message) => message.type === 'member', () => true);
      await waitFor(async () => (bus.state() === 'up' ? true : undefined), 'the bus to be up', 10_000);
      await cache.load('before', async () => ({ memberId: 'mem_a' }));
      expect(cache.get('before')).toEqual({ memberId: 'mem_a' });
      await own.stop();
      await waitFor(async () => (bus.state() === 'down' ? true : undefined), 'the bus to notice Redis is gone', 10_000);
      expect(cache.get('before')).toBeUndefined();
      expect(await cache.load('during', async () => ({ memberId: 'mem_b' }))).toEqual({ memberId: 'mem_b' });
      expect(cache.get('during')).toBeUndefined();
      await own.start();
      await waitFor(async () => (bus.state() === 'up' ? true : undefined), 'the bus to reconnect', 20_000);
      expect(cache.get('before')).toBeUndefined();
      await cache.load('after', async () => ({ memberId: 'mem_c' }));
      expect(cache.get('after')).toEqual({ memberId: 'mem_c' });
    } finally {
      await bus.close();
      await own.stop();
    }
  }, 40_000);
});

describe.skipIf(!redisUrl())('WidgetState and the platform switch while the Redis bus is down', () => {
  it('read the store on every request, so a change another node made is seen at once', async () => {
    const port = await freePort();
    const own = spawnRedis(port);
    await own.start();
    const bus = await createRedisBus(`redis://127.0.0.1:${port}`);
    const h = await createHarness('pglite');
    try {
      const t = await seedTenant(h.services);
      const widgetStates = createWidgetStates({ db: h.services.db, bus, clock: h.services.clock, realtime: h.services.realtime });
      const platform = createPlatform(h.services.db, bus, h.services.clock);
      await waitFor(async () => (bus.state() === 'up' ? true : undefined), 'the bus to be up', 10_000);
      // Another node's changes, whose bus messages never arrive here:
      const elsewhere = () => bumpAgentVersion(h.services.db, t.integrationId, t.agent.id);
      const first = await widgetStates.load(t.integrationId, t.agent.id);
      expect(await platform.isDisabled()).toBe(false);
      await elsewhere();
      await h.services.db.query(
        'INSERT INTO platform_settings (id, disabled, updated_at) VALUES (1, true, 0) ON CONFLICT (id) DO UPDATE SET disabled = true',
      );
      expect((await widgetStates.load(t.integrationId, t.agent.id)).version).toBe(first.version);
      expect(await platform.isDisabled()).toBe(false);
      await own.stop();
      await waitFor(async () => (bus.state() === 'down' ? true : undefined), 'the bus to notice Redis is gone', 10_000);
      expect((await widgetStates.load(t.integrationId, t.agent.id)).version).toBeGreaterThan(first.version);
      expect(await platform.isDisabled()).toBe(true);
    } finally {
      await bus.close();
      await own.stop();
      await h.close();
    }
  }, 40_000);
});

describe.each(storeDrivers())('the directory on %s', (driver) => {
  let h: Harness;
  let t: Tenant;

  beforeAll(async () => {
    h = await createHarness(driver);
    t = await seedTenant(h.services);
  });
  afterAll(() => h.close());

  it('serves an integration from memory until the bus says it changed', async () => {
    const directory = createDirectory(h.services.db, h.services.bus);
    const first = await directory.integration(t.integrationId);
    await h.services.db.query('UPDATE integrations SET name = $2 WHERE id = $1', [t.integrationId, 'Renamed behind its back']);
    expect(await directory.integration(t.integrationId)).toBe(first);
    h.services.bus.publish({ type: 'integration', integrationId: t.integrationId });
    expect((await directory.integration(t.integrationId))?.name).toBe('Renamed behind its back');
  });

  it('shares one resolved agent, drops it when the member changes, and never caches a refusal', async () => {
    const directory = createDirectory(h.services.db, h.services.bus);
    const integration = (await directory.integration(t.integrationId))!;
    const agent = await directory.agent(integration, t.agent.id);
    expect(await directory.agent(integration, t.agent.id)).toBe(agent);
    const deps = { db: h.services.db, bus: h.services.bus, clock: h.services.clock };
    await updateMember(deps, t.agent.id, { enabled: false });
    await expect(directory.agent(integration, t.agent.id)).rejects.toMatchObject({ code: 'agent_disabled' });
    await updateMember(deps, t.agent.id, { enabled: true });
    expect((await directory.agent(integration, t.agent.id)).member.enabled).toBe(true);
  });
});
