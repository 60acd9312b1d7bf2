/**
 * Redis counters, shared by every node: one key per (limit, client, window index), counted and
 * given its expiry by one script, so a hit is one command. The hits a busy node makes while one is
 * on its way go to Redis together, as one pipeline. The window index comes from the service's
 * clock, so nodes agree.
 */
import type { ChainableCommander, Redis } from 'ioredis';
import type { Clock } from '../clock.js';
import { coalesce } from '../store/coalesce.js';
import type { RateCounter } from './counter.js';

const HIT = `local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count`;

export function createRedisCounter(redis: Redis, clock: Clock): RateCounter {
  // Sent once, then run by its digest (EVALSHA).
  if (!('c2cRateHit' in redis)) redis.defineCommand('c2cRateHit', { numberOfKeys: 1, lua: HIT });
  const hits = coalesce<{ key: string; ttlMs: number }, number>(
    async (batch) => {
      const pipeline = redis.pipeline() as ChainableCommander & { c2cRateHit(key: string, ttlMs: number): ChainableCommander };
      for (const { key, ttlMs } of batch) pipeline.c2cRateHit(key, ttlMs);
      const replies = (await pipeline.exec()) ?? [];
      return batch.map((_, index) => {
        const [error, count] = replies[index] ?? [new Error('no reply from Redis')];
        if (error) throw error;
        return Number(count);
      });
    },
    // a failed hit fails alone; an INCR that did count is counted again, erring towards the limit
    { isolate: true },
  );
  return {
    driver: 'redis',
    async hit(key, windowMs) {
      const now = clock.now();
      const index = Math.floor(now / windowMs);
      const redisKey = `c2c:rl:${key}:${index}`;
      const count = await hits({ key: redisKey, ttlMs: windowMs * 2 });
      return { count, resetMs: (index + 1) * windowMs - now };
    },
    async close() {
      redis.disconnect();
    },
  };
}
