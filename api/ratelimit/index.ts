/** Rate counter factory: Redis when REDIS_URL is set (limits shared across nodes), memory otherwise. */
import type { Clock } from '../clock.js';
import { connectedRedis } from '../redis.js';
import type { RateCounter } from './counter.js';
import { createMemoryCounter } from './memory.js';
import { createRedisCounter } from './redis.js';

export type { RateCounter, Hit } from './counter.js';

export async function openRateCounter(redisUrl: string | undefined, clock: Clock): Promise<RateCounter> {
  return redisUrl ? createRedisCounter(await connectedRedis(redisUrl, 'c2c-ratelimit'), clock) : createMemoryCounter(clock);
}
