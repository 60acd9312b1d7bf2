/**
 * Redis counters, shared by every node: one key per (limit, client, window index), counted and
 * given its expiry by one script, so a hit is one command. The window index comes from the
 * service's clock, so nodes agree.
 */
import type { Redis } from 'ioredis';
import type { Clock } from '../clock.js';
import type { RateCounter } from './counter.js';

const HIT = `local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count`;

export function createRedisCounter(redis: Redis, clock: Clock): RateCounter {
  // Sent once, then run by its digest (EVALSHA).
  if (!('c2cRateHit' in redis)) redis.defineCommand('c2cRateHit', { numberOfKeys: 1, lua: HIT });
  const hitScript = (redis as Redis & { c2cRateHit(key: string, ttlMs: number): Promise<number> }).c2cRateHit.bind(redis);
  return {
    driver: 'redis',
    async hit(key, windowMs) {
      const now = clock.now();
      const index = Math.floor(now / windowMs);
      const redisKey = `c2c:rl:${key}:${index}`;
      const count = Number(await hitScript(redisKey, windowMs * 2));
      return { count, resetMs: (index + 1) * windowMs - now };
    },
    async close() {
      redis.disconnect();
    },
  };
}
