/**
 * The bus-invalidated caches behind the hot paths (api/domain/bus-cache.ts, directory.ts,
 * widget-states.ts, platform.ts): reads are served from memory while nothing changed, a change on
 * the bus drops exactly what it affects, a load that overlapped a change is not kept, refusals are
 * never cached, and while the bus is down (changes could be missed) every read goes to the store.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus } from '../../api/bus/memory.js';
import { ManualClock } from '../../api/clock.js';
import { createRedisBus } from '../../api/bus/redis.js';
import { BUS_CACHE_MAX_AGE_MS, createBusCache } from '../../api/domain/bus-cache.js';
import { bumpAgentVersion } from '../../api/domain/agent-state.js';
import { createDirectory } from '../../api/domain/directory.js';
import { createPlatform } from '../../api/domain/platform.js';
import { createWidgetStates } from '../../api/domain/widget-states.js';
import { updateMember } from '../../api/domain/operator/accounts.js';
import { setPolicy } from '../../api/domain/operator/integrations.js';
import { OriginPolicy } from '../../api/http/origin-policy.js';
import { redisUrl, storeDrivers } from '../helpers/env.js';
import { client, createHarness, type Harness } from '../helpers/harness.js';
import { openSession, widgetState } from '../helpers/flows.js';
import { expectError } from '../helpers/expect.js';
import { busReaches, ownRedis } from '../helpers/own-redis.js';
import { seedTenant, type Tenant } from '../helpers/tenant.js';

describe('a bus cache', () => {
  const clock = new ManualClock();
  const watched = (message: { type: string }) => message.type === 'member';
  const affects = (entry: { memberId: string }, message: { type: string; memberId?: string }) => message.memberId === entry.memberId;

  it('keeps a load, and drops it when a watched change names it', async () => {
    const bus = createMemoryBus();
    const cache = createBusCache(bus, clock, watched, affects);
    await cache.load('a', async () => ({ memberId: 'mem_a' }));
    await cache.load('b', async () => ({ memberId: 'mem_b' }));
    bus.publish({ type: 'member', memberId: 'mem_a' });
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('b')).toEqual({ memberId: 'mem_b' });
    bus.publish({ type: 'resync' });
    expect(cache.get('b')).toBeUndefined();
    await bus.close();
  });

  it('uses no entry older than a minute: a change whose message was lost without anyone noticing is read within that', async () => {
    const bus = createMemoryBus();
    const cache = createBusCache(bus, clock, watched, affects);
    await cache.load('a', async () => ({ memberId: 'mem_a' }));
    await clock.advance(BUS_CACHE_MAX_AGE_MS - 1);
    expect(cache.get('a')).toEqual({ memberId: 'mem_a' });
    await clock.advance(1);
    expect(cache.get('a')).toBeUndefined();
    await cache.load('a', async () => ({ memberId: 'mem_a2' }));
    expect(cache.get('a')).toEqual({ memberId: 'mem_a2' });
    await bus.close();
  });

  it('uses a load that overlapped a change once, without keeping it', async () => {
    const bus = createMemoryBus();
    const cache = createBusCache(bus, clock, watched, affects);
    let finish!: (value: { memberId: string }) => void;
    const loading = cache.load('a', () => new Promise<{ memberId: string }>((resolve) => (finish = resolve)));
    bus.publish({ type: 'member', memberId: 'mem_other' });
    finish({ memberId: 'mem_a' });
    expect(await loading).toEqual({ memberId: 'mem_a' });
    expect(cache.get('a')).toBeUndefined();
    await bus.close();
  });

  it('makes one read for loads of a key that overlap, and a new one once a watched change came in between', async () => {
    const bus = createMemoryBus();
    const cache = createBusCache(bus, clock, watched, affects);
    const reads: Array<(value: { memberId: string }) => void> = [];
    const loader = () => new Promise<{ memberId: string }>((resolve) => reads.push(resolve));
    const first = cache.load('a', loader);
    const second = cache.load('a', loader);
    expect(reads).toHaveLength(1);
    bus.publish({ type: 'member', memberId: 'mem_other' });
    const third = cache.load('a', loader);
    expect(reads).toHaveLength(2);
    reads[0]!({ memberId: 'mem_a' });
    reads[1]!({ memberId: 'mem_a2' });
    expect([await first, await second, await third]).toEqual([{ memberId: 'mem_a' }, { memberId: 'mem_a' }, { memberId: 'mem_a2' }]);
    expect(cache.get('a')).toEqual({ memberId: 'mem_a2' });
    // a failed read fails those who shared it, and the next load reads again
    const failing = cache.load('b', () => Promise.reject(new Error('store away')));
    await expect(cache.load('b', loader)).rejects.toThrow('store away');
    await expect(failing).rejects.toThrow('store away');
    const after = cache.load('b', loader);
    expect(reads).toHaveLength(3);
    reads[2]!({ memberId: 'mem_b' });
    expect(await after).toEqual({ memberId: 'mem_b' });
    await bus.close();
  });

  it('is not disturbed by messages it does not watch', async () => {
    const bus = createMemoryBus();
    const cache = createBusCache(bus, clock, watched, () => true);
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

/** The store, counting the statements whose text has `what`. */
function countingReads(db: Harness['services']['db'], what: string) {
  const reads = { count: 0 };
  const query: typeof db.query = (text, params) => {
    if (text.includes(what)) reads.count += 1;
    return db.query(text, params);
  };
  return { db: Object.assign(Object.create(db) as typeof db, { query }), reads };
}

/** A Redis bus on a Redis server of its own, which the test can stop and start again. */
async function busOnOwnRedis() {
  const redis = await ownRedis();
  const bus = await createRedisBus(redis.url);
  await busReaches(bus, 'up', 'the bus to be up');
  return {
    bus,
    stopRedis: async () => {
      await redis.stop();
      await busReaches(bus, 'down', 'the bus to notice Redis is gone');
    },
    startRedis: async () => {
      await redis.start();
      await busReaches(bus, 'up', 'the bus to reconnect');
    },
    close: async () => {
      await bus.close();
      await redis.stop();
    },
  };
}

describe.skipIf(!redisUrl())('caches while the Redis bus is down (changes could be missed)', () => {
  it('a bus cache serves nothing from memory, keeps nothing, and caches again once the bus is back', async () => {
    const redis = await busOnOwnRedis();
    try {
      const cache = createBusCache(redis.bus, new ManualClock(), (message) => message.type === 'member', () => true);
      await cache.load('before', async () => ({ memberId: 'mem_a' }));
      expect(cache.get('before')).toEqual({ memberId: 'mem_a' });
      await redis.stopRedis();
      expect(cache.get('before')).toBeUndefined();
      expect(await cache.load('during', async () => ({ memberId: 'mem_b' }))).toEqual({ memberId: 'mem_b' });
      expect(cache.get('during')).toBeUndefined();
      await redis.startRedis();
      expect(cache.get('before')).toBeUndefined();
      await cache.load('after', async () => ({ memberId: 'mem_c' }));
      expect(cache.get('after')).toEqual({ memberId: 'mem_c' });
    } finally {
      await redis.close();
    }
  }, 40_000);

  it('WidgetState and the platform switch read the store on every request, so another node\'s change is seen at once', async () => {
    const redis = await busOnOwnRedis();
    const h = await createHarness('pglite');
    try {
      const t = await seedTenant(h.services);
      const widgetStates = createWidgetStates({ db: h.services.db, bus: redis.bus, clock: h.services.clock, realtime: h.services.realtime });
      const platform = createPlatform(h.services.db, redis.bus, h.services.clock);
      const first = await widgetStates.load(t.integrationId, t.agent.id);
      expect(await platform.isDisabled()).toBe(false);
      // Another node's changes, whose bus messages never arrive here:
      await bumpAgentVersion(h.services.db, t.integrationId, t.agent.id);
      await h.services.db.query(
        'INSERT INTO platform_settings (id, disabled, updated_at) VALUES (1, true, 0) ON CONFLICT (id) DO UPDATE SET disabled = true',
      );
      expect((await widgetStates.load(t.integrationId, t.agent.id)).version).toBe(first.version);
      expect(await platform.isDisabled()).toBe(false);
      await redis.stopRedis();
      expect((await widgetStates.load(t.integrationId, t.agent.id)).version).toBeGreaterThan(first.version);
      expect(await platform.isDisabled()).toBe(true);
    } finally {
      await redis.close();
      await h.close();
    }
  }, 40_000);

  it("CORS's origin list is read from the store, so an origin another node allowed meanwhile is allowed at once", async () => {
    const redis = await busOnOwnRedis();
    const h = await createHarness('pglite');
    try {
      const t = await seedTenant(h.services);
      const policy = new OriginPolicy({ db: h.services.db, bus: redis.bus });
      const added = 'https://added.example';
      expect(await policy.allows(added)).toBe(false);
      await redis.stopRedis();
      // another node's change, whose bus message never arrives here
      await h.services.db.query('UPDATE integrations SET allowed_origins = array_append(allowed_origins, $2) WHERE id = $1', [t.integrationId, added]);
      expect(await policy.allows(added)).toBe(true);
      expect(policy.lastAnswer(added)).toBe(true);
    } finally {
      await redis.close();
      await h.close();
    }
  }, 40_000);

  it('the platform switch and integrations are read once for the requests of one moment, and again for each later one', async () => {
    const redis = await busOnOwnRedis();
    const h = await createHarness('pglite');
    try {
      const t = await seedTenant(h.services);
      const platformReads = countingReads(h.services.db, 'FROM platform_settings');
      const integrationReads = countingReads(h.services.db, 'FROM integrations');
      const platform = createPlatform(platformReads.db, redis.bus, h.services.clock);
      const directory = createDirectory(integrationReads.db, redis.bus, h.services.clock);
      await redis.stopRedis();
      const together = await Promise.all(Array.from({ length: 20 }, () => Promise.all([platform.isDisabled(), directory.integration(t.integrationId)])));
      expect(together.every(([disabled, integration]) => disabled === false && integration?.id === t.integrationId)).toBe(true);
      expect([platformReads.reads.count, integrationReads.reads.count]).toEqual([1, 1]);
      await platform.isDisabled();
      await directory.integration(t.integrationId);
      expect([platformReads.reads.count, integrationReads.reads.count]).toEqual([2, 2]);
    } finally {
      await redis.close();
      await h.close();
    }
  }, 40_000);
});

describe("an agent's WidgetState cache", () => {
  let h: Harness;
  const buses: Array<ReturnType<typeof createMemoryBus>> = [];
  beforeAll(async () => {
    h = await createHarness('pglite');
  });
  afterEach(async () => {
    for (const bus of buses.splice(0)) await bus.close();
  });
  afterAll(() => h.close());

  /** A fresh tenant's agent, and a cache of its state on an in-process bus of its own, reading through `db` (the store by default). */
  async function agentCache(db: Harness['services']['db'] = h.services.db) {
    const t = await seedTenant(h.services);
    const bus = createMemoryBus();
    buses.push(bus);
    const widgetStates = createWidgetStates({ db, bus, clock: h.clock, realtime: h.services.realtime });
    const agent = { integrationId: t.integrationId, memberId: t.agent.id };
    return {
      bus,
      agent,
      load: () => widgetStates.load(agent.integrationId, agent.memberId),
      /** another node's change: the store's version bumped, with no bus message */
      changeElsewhere: () => bumpAgentVersion(h.services.db, agent.integrationId, agent.memberId),
    };
  }

  it('does not keep a state read before a newer version was announced (the read raced the change), and keeps the next', async () => {
    const { db, reads } = countingReads(h.services.db, 'agent_versions');
    const { bus, agent, load } = await agentCache(db);
    const reading = load();
    // another node's change, announced while this read is on its way (it read the older version)
    bus.publish({ type: 'agent', ...agent, version: 1_000 });
    expect((await reading).version).toBeLessThan(1_000);
    await load();
    expect(reads.count).toBe(2); // the raced read was not kept
    await load();
    expect(reads.count).toBe(2); // the second was
  });

  it('uses no state older than a minute: a change whose message was lost without anyone noticing is read within that', async () => {
    const { load, changeElsewhere } = await agentCache();
    const first = await load();
    const changed = await changeElsewhere(); // its bus message never arrives here
    await h.clock.advance(BUS_CACHE_MAX_AGE_MS - 1);
    expect((await load()).version).toBe(first.version);
    await h.clock.advance(1);
    expect((await load()).version).toBe(changed);
  });

  it('keeps a state over a minute old whose version the store still has, on a read of the version alone, for another minute', async () => {
    const states = countingReads(h.services.db, 'FROM engines');
    const versions = countingReads(states.db, 'agent_versions');
    const { load } = await agentCache(versions.db);
    const first = await load();
    expect([states.reads.count, versions.reads.count]).toEqual([1, 1]); // the state's read names both
    await h.clock.advance(BUS_CACHE_MAX_AGE_MS);
    expect(await load()).toBe(first);
    expect([states.reads.count, versions.reads.count]).toEqual([1, 2]); // the version alone
    await h.clock.advance(BUS_CACHE_MAX_AGE_MS - 1);
    expect(await load()).toBe(first);
    expect([states.reads.count, versions.reads.count]).toEqual([1, 2]); // good for another minute
  });

  it('does not keep a state over a minute old whose version read answered after a newer version was announced', async () => {
    // the version read runs at once, and its answer is held until the test lets it go
    let release!: () => void;
    let ran!: () => void;
    let held: Promise<void> | undefined;
    const query: typeof h.services.db.query = async (text, params) => {
      const rows = await h.services.db.query(text, params);
      if (held && text.includes('agent_versions') && !text.includes('FROM engines')) {
        ran();
        await held;
      }
      return rows as never;
    };
    const { bus, agent, load, changeElsewhere } = await agentCache(Object.assign(Object.create(h.services.db) as typeof h.services.db, { query }));
    const first = await load();
    await h.clock.advance(BUS_CACHE_MAX_AGE_MS);
    held = new Promise<void>((resolve) => (release = resolve));
    const versionRead = new Promise<void>((resolve) => (ran = resolve));
    const loading = load();
    await versionRead; // it found the cached version
    // another node's change, announced while that answer is on its way
    const changed = await changeElsewhere();
    bus.publish({ type: 'agent', ...agent, version: changed });
    held = undefined;
    release();
    expect((await loading).version).toBe(changed);
    expect(changed).toBeGreaterThan(first.version);
  });
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
    const directory = createDirectory(h.services.db, h.services.bus, h.services.clock);
    const first = await directory.integration(t.integrationId);
    await h.services.db.query('UPDATE integrations SET name = $2 WHERE id = $1', [t.integrationId, 'Renamed behind its back']);
    expect(await directory.integration(t.integrationId)).toBe(first);
    h.services.bus.publish({ type: 'integration', integrationId: t.integrationId });
    expect((await directory.integration(t.integrationId))?.name).toBe('Renamed behind its back');
  });

  it("resolves an agent against the integration as the store has it, not a copy its caller read before an operator's change (and keeps that)", async () => {
    const directory = createDirectory(h.services.db, h.services.bus, h.services.clock);
    const deps = { db: h.services.db, bus: h.services.bus, clock: h.services.clock };
    // read just before the operator took the keypad away; the change's message came before the agent's load
    const before = (await directory.integration(t.integrationId))!;
    await setPolicy(deps, t.integrationId, { controls: ['mute'] });
    try {
      expect((await directory.agent(before, t.agent.id)).effective.policy.controls).toEqual(['mute']);
      expect((await directory.agent(before, t.agent.id)).effective.policy.controls).toEqual(['mute']);
    } finally {
      await setPolicy(deps, t.integrationId, { controls: ['mute', 'dtmf'] });
    }
  });

  it('shares one resolved agent, drops it when the member changes, and never caches a refusal', async () => {
    const directory = createDirectory(h.services.db, h.services.bus, h.services.clock);
    const integration = (await directory.integration(t.integrationId))!;
    const agent = await directory.agent(integration, t.agent.id);
    expect(await directory.agent(integration, t.agent.id)).toBe(agent);
    const deps = { db: h.services.db, bus: h.services.bus, clock: h.services.clock };
    await updateMember(deps, t.agent.id, { enabled: false });
    await expect(directory.agent(integration, t.agent.id)).rejects.toMatchObject({ code: 'agent_disabled' });
    // enabled again behind the bus's back: a cached refusal would still be answered
    await h.services.db.query('UPDATE members SET enabled = true WHERE id = $1', [t.agent.id]);
    expect((await directory.agent(integration, t.agent.id)).member.enabled).toBe(true);
  });
});

describe.each(storeDrivers())('the platform switch on %s', (driver) => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness(driver);
  });
  afterAll(() => h.close());

  const counted = () => countingReads(h.services.db, 'FROM platform_settings');

  it('answers the requests that find no cached value with one read', async () => {
    const { db, reads } = counted();
    const platform = createPlatform(db, createMemoryBus(), h.clock);
    expect(await Promise.all(Array.from({ length: 50 }, () => platform.isDisabled()))).toEqual(Array(50).fill(false));
    expect(reads.count).toBe(1);
    await platform.isDisabled();
    expect(reads.count).toBe(1);
  });

  it('keeps what a message said over a read the message overtook', async () => {
    const { db } = counted();
    const bus = createMemoryBus();
    const platform = createPlatform(db, bus, h.clock);
    const reading = platform.isDisabled();
    // another node switched the platform off while this read was on its way
    bus.publish({ type: 'platform', disabled: true });
    expect(await reading).toBe(false);
    expect(await platform.isDisabled()).toBe(true);
  });
});

describe.each(storeDrivers())('a widget token revoked on a node whose bus message never reached this one, on %s', (driver) => {
  it('is refused here once its cached check is a minute old: a lost message leaves a revoked token usable for a minute, not until it expires', async () => {
    const h = await createHarness(driver);
    try {
      const t = await seedTenant(h.services);
      const api = client(h.app);
      const token = await openSession(api, t);
      expect((await widgetState(api, token)).status).toBe(200); // checked, and the check cached
      // another node ends the session; its message is lost (that node killed while cut off from Redis, say)
      await h.services.db.query("UPDATE widget_sessions SET revoked_at = $1, end_reason = 'revoked' WHERE integration_id = $2", [h.clock.now(), t.integrationId]);
      expect((await widgetState(api, token)).status).toBe(200);
      await h.clock.advance(BUS_CACHE_MAX_AGE_MS);
      await expectError(widgetState(api, token), 401, 'unauthorized');
    } finally {
      await h.close();
    }
  });
});
