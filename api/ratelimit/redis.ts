/**
 * Redis counters, shared by every node: one key per (limit, client, window index), INCR plus an
 * expiry in one round trip. The window index comes from the service's clock, so nodes agree.
 */
import type { Redis } from 'ioredis';
import type { Clock } from '../clock.js';
import type { RateCounter } from './counter.js';

export function createRedisCounter(redis: Redis, clock: Clock): RateCounter {
  return {
    driver: 'redis',
    async hit(key, windowMs) {
      const now = clock.now();
      const index = Math.floor(now / windowMs);
      const redisKey = `c2c:rl:${key}:${index}`;
      const result = await redis.multi().incr(redisKey).pexpire(redisKey, windowMs * 2).exec();
      const count = Number(result?.[0]?.[1] ?? 0);
      return { count, resetMs: (index + 1) * windowMs - now };
    },
    async close() {
      redis.disconnect();
    },
  };
}
