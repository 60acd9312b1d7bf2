/** The rate counter driver suite: memory and Redis count the same fixed windows on the injected clock. */
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../api/clock.js';
import { connectedRedis } from '../../api/redis.js';
import type { RateCounter } from '../../api/ratelimit/index.js';
import { createMemoryCounter } from '../../api/ratelimit/memory.js';
import { createRedisCounter } from '../../api/ratelimit/redis.js';
import { redisUrl } from '../helpers/env.js';

const url = redisUrl();
const drivers: Array<[string, (clock: ManualClock) => Promise<RateCounter>]> = [['memory', async (clock) => createMemoryCounter(clock)]];
if (url) drivers.push(['redis', async (clock) => createRedisCounter(await connectedRedis(url, 'c2c-test-rl'), clock)]);

describe.each(drivers)('rate counter %s', (_name, open) => {
  const counters: RateCounter[] = [];
  afterAll(async () => { for (const c of counters) await c.close(); });

  it('counts hits in a window and reports the time left in it', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 9, 0, 0));
    const counter = await open(clock);
    counters.push(counter);
    const key = `k-${Math.random()}`;
    expect(await counter.hit(key, 60_000)).toEqual({ count: 1, resetMs: 60_000 });
    await clock.advance(15_000);
    expect(await counter.hit(key, 60_000)).toEqual({ count: 2, resetMs: 45_000 });
    expect((await counter.hit(`${key}-other`, 60_000)).count).toBe(1);
    await clock.advance(45_000);
    expect(await counter.hit(key, 60_000)).toEqual({ count: 1, resetMs: 60_000 });
  });

  it('counts hits sent at once (one pipeline on Redis), each caller getting its own count', async () => {
    const counter = await open(new ManualClock());
    counters.push(counter);
    const key = `burst-${Math.random()}`;
    const hits = await Promise.all(Array.from({ length: 25 }, (_, i) => counter.hit(i % 5 === 4 ? `${key}-b` : key, 60_000)));
    expect(hits.filter((_, i) => i % 5 !== 4).map((hit) => hit.count).sort((x, y) => x - y)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(hits.filter((_, i) => i % 5 === 4).map((hit) => hit.count).sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5]);
  });
});

describe.skipIf(!url)('Redis rate counters across nodes', () => {
  it('share one window between two nodes', async () => {
    const clock = new ManualClock();
    const a = createRedisCounter(await connectedRedis(url!, 'c2c-test-rl-a'), clock);
    const b = createRedisCounter(await connectedRedis(url!, 'c2c-test-rl-b'), clock);
    const key = `shared-${Math.random()}`;
    await a.hit(key, 60_000);
    expect((await b.hit(key, 60_000)).count).toBe(2);
    await a.close();
    await b.close();
  });
});
