/** Rate counter factory: Redis when REDIS_URL is set (limits shared across nodes), memory otherwise. */
import type { Clock } from '../clock.js';
import type { Redis } from 'ioredis';
import { connectedRedis } from '../redis.js';
import type { RateCounter } from './counter.js';
import { createMemoryCounter } from './memory.js';
import { createRedisCounter } from './redis.js';

export type { RateCounter, Hit } from './counter.js';

export async function openRateCounter(redisUrl: string | undefined, clock: Clock): Promise<RateCounter> {
  return redisUrl ? createRedisCounter(await counterRedis(redisUrl), clock) : createMemoryCounter(clock);
}

/**
 * The counters' Redis connection. Hits on their way when the connection drops are not sent again
 * once it is back (ioredis would, and Redis may have counted them already): each is counted once
 * at most (redis.ts).
 */
export function counterRedis(redisUrl: string): Promise<Redis> {
  return connectedRedis(redisUrl, 'c2c-ratelimit', { resendInFlight: false });
}
