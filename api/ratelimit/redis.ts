/**
 * Redis counters, shared by every node: one key per (limit, client, window index), counted and
 * given its expiry by one script. The window index comes from the service's clock, so nodes agree.
 *
 * Most hits wait on no Redis round trip. A node answers a hit from what it knows — the window's
 * count as Redis last told it, plus this node's own hits since — and sends the hits it answered so
 * to Redis within FLUSH_MS, one INCRBY per key for all of them. It asks Redis and waits for the
 * exact count instead (sending its unsent hits with it) whenever that estimate could be wrong
 * about the decision: the key is new to this node in this window, the estimate has reached half the
 * limit, or LOCAL_SHARE of the limit is already on this node and not yet acknowledged by Redis
 * (unsent or on its way). Near a limit every decision is then Redis's count, and the hits Redis
 * does not know of are at most LOCAL_SHARE of the limit on each node: a window admits at most the
 * limit plus that much for each node. The hits a busy node sends in the same moment go to Redis as
 * one pipeline.
 */
import type { ChainableCommander, Redis } from 'ioredis';
import { atMost } from '../at-most.js';
import type { Clock } from '../clock.js';
import { coalesce } from '../store/coalesce.js';
import type { RateCounter } from './counter.js';

/** How long a node holds hits it answered on its own before Redis counts them. */
export const FLUSH_MS = 20;
/** The most of a limit a node may hold answered on its own and not yet acknowledged by Redis. */
export const LOCAL_SHARE = 0.05;
/**
 * How long a request waits for Redis's count: a Redis that stopped answering without closing the
 * connection (frozen, or cut off without a reset) must not hold up the requests near their limits.
 * They go uncounted then, as while Redis is unreachable.
 */
export const ANSWER_WITHIN_MS = 1000;
/** How long a stopping node waits for its last hits to reach Redis (real time: a stop's deadline is the process's). */
export const CLOSE_WAIT_MS = 500;

const HIT = `local count = redis.call('INCRBY', KEYS[1], ARGV[2])
if count == tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count`;

/** What this node knows of one key in one window. */
interface Window {
  readonly key: string;
  readonly index: number;
  readonly ttlMs: number;
  /** whether Redis has answered for this window yet (until then every hit asks it) */
  synced: boolean;
  /** the count Redis last returned, which counts every hit this node sent before it */
  known: number;
  /** hits sent, not yet answered */
  sending: number;
  /** hits this node answered on its own and has not sent */
  unsent: number;
}

export function createRedisCounter(redis: Redis, clock: Clock): RateCounter {
  // Sent once, then run by its digest (EVALSHA).
  if (!('c2cRateHit' in redis)) redis.defineCommand('c2cRateHit', { numberOfKeys: 1, lua: HIT });
  // A pipeline on its way when the connection drops may have been counted by Redis or not. The
  // connection does not send it again (counterRedis), and gives it no answer either, so it fails
  // here: uncounted as far as this node knows, and counted once at most in Redis. So does one Redis
  // has not answered within ANSWER_WITHIN_MS.
  const onTheirWay = new Set<(error: Error) => void>();
  redis.on('close', () => {
    for (const fail of onTheirWay) fail(new Error('the connection to Redis dropped with these hits on their way'));
    onTheirWay.clear();
  });
  const exec = (pipeline: ChainableCommander) =>
    new Promise<Awaited<ReturnType<ChainableCommander['exec']>>>((resolve, reject) => {
      const late = clock.after(ANSWER_WITHIN_MS, () => {
        onTheirWay.delete(reject);
        reject(new Error(`Redis did not answer within ${ANSWER_WITHIN_MS} ms`));
      });
      onTheirWay.add(reject);
      pipeline
        .exec()
        .then(resolve, reject)
        .finally(() => {
          late.cancel();
          onTheirWay.delete(reject);
        });
    });
  // One reply per item: Redis applies each INCRBY of a pipeline on its own, so one that failed
  // must not send the others again (they would be counted twice).
  const increments = coalesce<{ key: string; by: number; ttlMs: number }, number | Error>(async (batch) => {
    const pipeline = redis.pipeline() as ChainableCommander & { c2cRateHit(key: string, ttlMs: number, by: number): ChainableCommander };
    for (const { key, ttlMs, by } of batch) pipeline.c2cRateHit(key, ttlMs, by);
    const replies = (await exec(pipeline)) ?? [];
    return batch.map((_, index) => {
      const [error, count] = replies[index] ?? [new Error('no reply from Redis')];
      return error ?? Number(count);
    });
  });

  const windows = new Map<string, Window>();
  const dirty = new Set<Window>();
  const sends = new Set<Promise<number>>();
  let flushTimer: { cancel(): void } | undefined;
  let lastSweep = 0;
  let closed = false;

  /** Sends `by` hits of the window (its unsent ones and, for an exact answer, the caller's); resolves to Redis's count. */
  function send(window: Window, by: number): Promise<number> {
    window.sending += by;
    const sent = increments({ key: window.key, by, ttlMs: window.ttlMs })
      .then((count) => {
        if (count instanceof Error) throw count;
        window.known = Math.max(window.known, count);
        window.synced = true;
        return count;
      })
      .finally(() => {
        window.sending -= by;
        sends.delete(sent);
      });
    sends.add(sent);
    return sent;
  }

  /**
   * Redis's count, or a failure once ANSWER_WITHIN_MS have passed since the hit. The pipelines go
   * one after another, each waiting its own ANSWER_WITHIN_MS on a frozen Redis: the hits of the
   * fifth would otherwise wait five seconds. The count still arriving later is kept (window.known).
   */
  function answeredInTime(count: Promise<number>): Promise<number> {
    return new Promise((resolve, reject) => {
      const late = clock.after(ANSWER_WITHIN_MS, () => reject(new Error(`Redis did not answer within ${ANSWER_WITHIN_MS} ms`)));
      count.then(resolve, reject).finally(() => late.cancel());
    });
  }

  function takeUnsent(window: Window): number {
    const unsent = window.unsent;
    window.unsent = 0;
    dirty.delete(window);
    return unsent;
  }

  /** Sends every window's unsent hits. They were answered already: if Redis is unreachable they go uncounted, as every hit does then. */
  async function flush(): Promise<void> {
    flushTimer = undefined;
    await Promise.allSettled([...dirty].map((window) => send(window, takeUnsent(window))));
  }

  function sweep(now: number, windowMs: number): void {
    if (now - lastSweep <= windowMs) return;
    lastSweep = now;
    const index = Math.floor(now / windowMs);
    for (const [key, window] of windows) if (window.index < index && window.unsent === 0) windows.delete(key);
  }

  return {
    driver: 'redis',
    async hit(key, windowMs, limit) {
      if (closed) throw new Error('rate counter closed');
      const now = clock.now();
      sweep(now, windowMs);
      const index = Math.floor(now / windowMs);
      const redisKey = `c2c:rl:${key}:${index}`;
      const resetMs = (index + 1) * windowMs - now;
      let window = windows.get(redisKey);
      if (!window) {
        window = { key: redisKey, index, ttlMs: windowMs * 2, synced: false, known: 0, sending: 0, unsent: 0 };
        windows.set(redisKey, window);
      }
      const unacknowledged = window.sending + window.unsent + 1;
      const estimate = window.known + unacknowledged;
      // written so that a limit that is not a number asks Redis every time
      if (!window.synced || !(estimate * 2 <= limit && unacknowledged <= limit * LOCAL_SHARE)) {
        return { count: await answeredInTime(send(window, takeUnsent(window) + 1)), resetMs };
      }
      window.unsent += 1;
      dirty.add(window);
      flushTimer ??= clock.after(FLUSH_MS, flush);
      return { count: estimate, resetMs };
    },
    async close() {
      closed = true;
      flushTimer?.cancel();
      // The hits not counted by then go uncounted, as while Redis is out of reach. A Redis that
      // froze answers none, and a busy node's queue of pipelines, a second each, would hold up the
      // rest of the stop (the bus's and the store's close come after this) past its deadline.
      await atMost(Promise.allSettled([flush(), ...sends]), CLOSE_WAIT_MS);
      redis.disconnect();
    },
  };
}
