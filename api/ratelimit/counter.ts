/**
 * Fixed-window request counters behind the rate limits of spec section 8. Windows are aligned to
 * the clock (window index = floor(now / windowMs)), so both drivers agree on when a window ends
 * and tests move time with a ManualClock instead of sleeping.
 */
import { C2CError } from '../../shared/errors.js';

export interface Hit {
  /** requests counted in the current window, this one included */
  count: number;
  /** milliseconds until the window ends */
  resetMs: number;
}

export interface RateCounter {
  readonly driver: 'memory' | 'redis';
  /**
   * Counts a hit. `limit` is the most hits the caller admits in a window: a driver shared by
   * several nodes may answer a hit far below it from what the node knows, without a round trip
   * (redis.ts), and is exact near it. The memory driver is always exact.
   */
  hit(key: string, windowMs: number, limit: number): Promise<Hit>;
  close(): Promise<void>;
}

/** The catalogue's rate_limited for a hit over its limit, with the seconds left (REST's Retry-After, the socket's retry_after). */
export function rateLimited(resetMs: number, message?: string): C2CError {
  return new C2CError('rate_limited', message, { retryAfter: Math.max(1, Math.ceil(resetMs / 1000)) });
}

/** A limit multiplied by C2C_RATE_LIMIT_SCALE (benchmarks), never below 1: a limit of 0 would refuse everything. */
export const scaledLimit = (limit: number, scale: number): number => Math.max(1, Math.round(limit * scale));
