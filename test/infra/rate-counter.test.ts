/** The rate counter driver suite: memory and Redis count the same fixed windows on the injected clock. */
import { afterAll, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../api/clock.js';
import { connectedRedis } from '../../api/redis.js';
import { counterRedis, type RateCounter } from '../../api/ratelimit/index.js';
import { createMemoryCounter } from '../../api/ratelimit/memory.js';
import { ANSWER_WITHIN_MS, CLOSE_WAIT_MS, createRedisCounter, FLUSH_MS, LOCAL_SHARE } from '../../api/ratelimit/redis.js';
import { redisUrl } from '../helpers/env.js';
import { freePort, spawnRedis } from '../helpers/processes.js';

const url = redisUrl();
const LIMIT = 600;
const drivers: Array<[string, (clock: ManualClock) => Promise<RateCounter>]> = [['memory', async (clock) => createMemoryCounter(clock)]];
if (url) drivers.push(['redis', async (clock) => createRedisCounter(await counterRedis(url), clock)]);

describe.each(drivers)('rate counter %s', (_name, open) => {
  const counters: RateCounter[] = [];
  afterAll(async () => { for (const c of counters) await c.close(); });

  it('counts hits in a window and reports the time left in it', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 9, 0, 0));
    const counter = await open(clock);
    counters.push(counter);
    const key = `k-${Math.random()}`;
    expect(await counter.hit(key, 60_000, LIMIT)).toEqual({ count: 1, resetMs: 60_000 });
    await clock.advance(15_000);
    expect(await counter.hit(key, 60_000, LIMIT)).toEqual({ count: 2, resetMs: 45_000 });
    expect((await counter.hit(`${key}-other`, 60_000, LIMIT)).count).toBe(1);
    await clock.advance(45_000);
    expect(await counter.hit(key, 60_000, LIMIT)).toEqual({ count: 1, resetMs: 60_000 });
  });

  it('counts hits sent at once (one pipeline on Redis), each caller getting its own count', async () => {
    const counter = await open(new ManualClock());
    counters.push(counter);
    const key = `burst-${Math.random()}`;
    const hits = await Promise.all(Array.from({ length: 25 }, (_, i) => counter.hit(i % 5 === 4 ? `${key}-b` : key, 60_000, LIMIT)));
    expect(hits.filter((_, i) => i % 5 !== 4).map((hit) => hit.count).sort((x, y) => x - y)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(hits.filter((_, i) => i % 5 === 4).map((hit) => hit.count).sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5]);
  });

  it('counts one after another past the limit, every hit over it seen as over', async () => {
    const counter = await open(new ManualClock());
    counters.push(counter);
    const key = `seq-${Math.random()}`;
    const counts: number[] = [];
    for (let i = 0; i < 30; i += 1) counts.push((await counter.hit(key, 60_000, 20)).count);
    expect(counts).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
  });
});

describe.skipIf(!url)('Redis rate counters across nodes', () => {
  const nodes = async (clock: ManualClock) => [
    createRedisCounter(await counterRedis(url!), clock),
    createRedisCounter(await counterRedis(url!), clock),
  ];
  /** What Redis holds for a key in the clock's current 60 s window. */
  const inRedis = async (clock: ManualClock, key: string) => {
    const redis = await connectedRedis(url!, 'c2c-test-rl-read');
    try {
      return Number(await redis.get(`c2c:rl:${key}:${Math.floor(clock.now() / 60_000)}`));
    } finally {
      redis.disconnect();
    }
  };

  it('share one window between two nodes', async () => {
    const clock = new ManualClock();
    const [a, b] = await nodes(clock);
    const key = `shared-${Math.random()}`;
    await a!.hit(key, 60_000, LIMIT);
    expect((await b!.hit(key, 60_000, LIMIT)).count).toBe(2);
    await a!.close();
    await b!.close();
  });

  it('answer hits far below the limit without waiting for Redis, which counts them within FLUSH_MS', async () => {
    const clock = new ManualClock();
    const [a, b] = await nodes(clock);
    const key = `local-${Math.random()}`;
    // the first hit of a window asks Redis; the next ones are answered by the node
    expect((await a!.hit(key, 60_000, LIMIT)).count).toBe(1);
    for (let i = 2; i <= 10; i += 1) expect((await a!.hit(key, 60_000, LIMIT)).count).toBe(i);
    expect(await inRedis(clock, key)).toBe(1);
    // another node asking now does not see them yet; after FLUSH_MS it does
    expect((await b!.hit(key, 60_000, LIMIT)).count).toBe(2);
    await clock.advance(FLUSH_MS);
    expect(await inRedis(clock, key)).toBe(11);
    // closing sends nothing twice
    await b!.close();
    await a!.close();
    expect(await inRedis(clock, key)).toBe(11);
  });

  it('admit at most the limit plus LOCAL_SHARE of it per node, then refuse every hit, losing none', async () => {
    const clock = new ManualClock();
    const [a, b] = await nodes(clock);
    const key = `edge-${Math.random()}`;
    const limit = 100;
    // no time passes: nothing reaches Redis but what a node sends to ask it
    const counts: number[] = [];
    for (let i = 0; i < 300; i += 1) counts.push((await (i % 2 ? b! : a!).hit(key, 60_000, limit)).count);
    const admitted = counts.filter((count) => count <= limit).length;
    expect(admitted).toBeGreaterThanOrEqual(limit);
    expect(admitted).toBeLessThanOrEqual(limit + 2 * limit * LOCAL_SHARE);
    // once refused, never admitted again in that window
    const firstRefused = counts.findIndex((count) => count > limit);
    expect(counts.slice(firstRefused).every((count) => count > limit)).toBe(true);
    await a!.close();
    await b!.close();
    expect(await inRedis(clock, key)).toBe(300);
  });

  it('let a node with an old count answer at most LOCAL_SHARE of the limit on its own, however many hits arrive at once', async () => {
    const clock = new ManualClock();
    const [a, b] = await nodes(clock);
    const key = `stale-${Math.random()}`;
    const limit = 100;
    expect((await a!.hit(key, 60_000, limit)).count).toBe(1);
    // b takes the window to the limit; a still knows a count of 1
    for (let i = 0; i < limit - 1; i += 1) await b!.hit(key, 60_000, limit);
    await clock.advance(FLUSH_MS);
    expect(await inRedis(clock, key)).toBe(limit);
    const burst = await Promise.all(Array.from({ length: 300 }, () => a!.hit(key, 60_000, limit)));
    expect(burst.filter((hit) => hit.count <= limit).length).toBe(limit * LOCAL_SHARE);
    // what a admits after Redis answered it is refused
    expect((await a!.hit(key, 60_000, limit)).count).toBeGreaterThan(limit);
    await a!.close();
    await b!.close();
    expect(await inRedis(clock, key)).toBe(limit + 301);
  });

  /** A Redis of the test's own (to stop or freeze), and a counter on it, connected as a node's is. */
  const counterOnOwnRedis = async () => {
    const port = await freePort();
    const server = spawnRedis(port);
    await server.start();
    const url = `redis://127.0.0.1:${port}`;
    const clock = new ManualClock();
    const client = await counterRedis(url);
    return { server, url, clock, client, counter: createRedisCounter(client, clock) };
  };

  it('let a stopping node go within CLOSE_WAIT_MS when Redis froze with hits on their way: those go uncounted', async () => {
    const { server, counter } = await counterOnOwnRedis();
    try {
      const key = `frozen-${Math.random()}`;
      expect((await counter.hit(key, 60_000, LIMIT)).count).toBe(1);
      server.pause();
      // a hit of a window this node has no count of goes to Redis, which answers nothing now
      // (and the counter's own timeouts run on the test's clock, which stands still: only the stop's bound ends the wait)
      void counter.hit(`${key}-b`, 60_000, LIMIT).catch(() => 'uncounted');
      const stop = await Promise.race([
        counter.close().then(() => 'closed'),
        new Promise((resolve) => setTimeout(() => resolve('still closing'), CLOSE_WAIT_MS + 4500)),
      ]);
      expect(stop).toBe('closed');
    } finally {
      server.resume();
      await server.stop();
    }
  });

  it('count again once Redis is back, and never twice', async () => {
    const { server, url: own, clock, client, counter } = await counterOnOwnRedis();
    try {
      const key = `down-${Math.random()}`;
      expect((await counter.hit(key, 60_000, LIMIT)).count).toBe(1);
      expect((await counter.hit(key, 60_000, LIMIT)).count).toBe(2);
      await server.stop();
      await vi.waitFor(() => expect(client.status).not.toBe('ready'));
      // the unsent hit fails to go; hits are answered or refused by the caller's rule (fail open), never thrown unhandled
      await clock.advance(FLUSH_MS);
      await server.start();
      await vi.waitFor(async () => expect((await counter.hit(`${key}-probe`, 60_000, LIMIT)).count).toBe(1), { timeout: 5000, interval: 100 });
      // Redis came back empty: the key counts from what reaches it now, each hit once
      const counts: number[] = [];
      for (let i = 0; i < 5; i += 1) counts.push((await counter.hit(key, 60_000, LIMIT)).count);
      await counter.close();
      const reader = await connectedRedis(own, 'c2c-test-rl-read');
      const stored = Number(await reader.get(`c2c:rl:${key}:${Math.floor(clock.now() / 60_000)}`));
      reader.disconnect();
      expect(stored).toBeGreaterThanOrEqual(4);
      expect(stored).toBeLessThanOrEqual(5);
      expect(counts.at(-1)).toBeGreaterThanOrEqual(stored);
    } finally {
      await server.stop();
    }
  });

  it('never count twice a hit that was on its way when the connection dropped', async () => {
    const { server, url: own, clock, client, counter } = await counterOnOwnRedis();
    const reader = await connectedRedis(own, 'c2c-test-rl-read');
    try {
      const key = `in-flight-${Math.random()}`;
      // Redis frozen: the hit is written to the connection and waits there, unanswered.
      server.pause();
      const hit = counter.hit(key, 60_000, LIMIT).then((h) => h.count, (error: unknown) => error);
      await new Promise((resolve) => setTimeout(resolve, 100));
      // The connection drops with the hit on it; Redis, thawed, still runs what it had received.
      client.stream.destroy();
      server.resume();
      // The caller is told the hit failed (and counts it as nothing, as it does while Redis is away).
      expect(await hit).toBeInstanceOf(Error);
      await vi.waitFor(() => expect(client.status).toBe('ready'), { timeout: 5000, interval: 50 });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(Number(await reader.get(`c2c:rl:${key}:${Math.floor(clock.now() / 60_000)}`))).toBe(1);
    } finally {
      reader.disconnect();
      await counter.close();
      await server.stop();
    }
  });

  it('give up on a count Redis does not answer within ANSWER_WITHIN_MS, so no request waits on a frozen Redis', async () => {
    const { server, clock, counter } = await counterOnOwnRedis();
    try {
      const key = `frozen-${Math.random()}`;
      server.pause();
      // a key's first hit waits for Redis's count
      const hit = counter.hit(key, 60_000, LIMIT).then((h) => h.count, (error: unknown) => error);
      // let the hit leave (the counter sends what a moment gathers together)
      await new Promise((resolve) => setTimeout(resolve, 50));
      await clock.advance(ANSWER_WITHIN_MS - 1);
      expect(await Promise.race([hit, 'waiting'])).toBe('waiting');
      await clock.advance(1);
      expect(await hit).toBeInstanceOf(Error);
      server.resume();
      // Redis is answering again: so are hits
      expect((await counter.hit(`${key}-next`, 60_000, LIMIT)).count).toBe(1);
    } finally {
      server.resume();
      await counter.close();
      await server.stop();
    }
  });

  it('gives up on every count within ANSWER_WITHIN_MS of its hit, however many wait on a frozen Redis', async () => {
    const { server, clock, counter } = await counterOnOwnRedis();
    try {
      server.pause();
      // first hits of new keys, each waiting for Redis's count: more than one pipeline's worth
      const hits = Array.from({ length: 1200 }, (_, i) => counter.hit(`frozen-many-${Math.random()}-${i}`, 60_000, LIMIT).then((h) => h.count, (error: unknown) => error));
      await new Promise((resolve) => setTimeout(resolve, 50)); // the first pipeline leaves
      await clock.advance(ANSWER_WITHIN_MS);
      const settled = await Promise.race([Promise.all(hits), new Promise((resolve) => setTimeout(() => resolve('still waiting'), 1000))]);
      expect(settled).not.toBe('still waiting');
      expect((settled as unknown[]).every((result) => result instanceof Error)).toBe(true);
    } finally {
      server.resume();
      await counter.close();
      await server.stop();
    }
  });

  it('ask Redis again for a new window, and drop nothing a closing node holds', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 9, 0, 0) + Math.floor(Math.random() * 1e6) * 60_000);
    const [a, b] = await nodes(clock);
    const key = `roll-${Math.random()}`;
    for (let i = 0; i < 5; i += 1) await a!.hit(key, 60_000, LIMIT);
    await clock.advance(60_000);
    expect(await inRedis(new ManualClock(clock.now() - 60_000), key)).toBe(5);
    // the old window's hits were sent on the way; the new window starts from Redis's count
    await b!.hit(key, 60_000, LIMIT);
    expect((await a!.hit(key, 60_000, LIMIT)).count).toBe(2);
    await a!.hit(key, 60_000, LIMIT);
    await a!.close();
    expect(await inRedis(clock, key)).toBe(3);
    await b!.close();
  });
});
