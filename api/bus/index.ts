/** Bus factory: Redis when REDIS_URL is set, in-process otherwise. */
import type { Clock } from '../clock.js';
import type { Bus } from './bus.js';
import { createMemoryBus } from './memory.js';
import { createRedisBus } from './redis.js';

export type { Bus, BusMessage, BusState } from './bus.js';

export function openBus(redisUrl: string | undefined, clock: Clock): Promise<Bus> {
  return redisUrl ? createRedisBus(redisUrl, clock) : Promise.resolve(createMemoryBus());
}
