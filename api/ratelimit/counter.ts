/**
 * Fixed-window request counters behind the rate limits of spec section 8. Windows are aligned to
 * the clock (window index = floor(now / windowMs)), so both drivers agree on when a window ends
 * and tests move time with a ManualClock instead of sleeping.
 */
export interface Hit {
  /** requests counted in the current window, this one included */
  count: number;
  /** milliseconds until the window ends */
  resetMs: number;
}

export interface RateCounter {
  readonly driver: 'memory' | 'redis';
  hit(key: string, windowMs: number): Promise<Hit>;
  close(): Promise<void>;
}
