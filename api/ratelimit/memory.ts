/** In-memory counters for a single node. Old windows are dropped as time moves on. */
import type { Clock } from '../clock.js';
import type { RateCounter } from './counter.js';

export function createMemoryCounter(clock: Clock): RateCounter {
  const windows = new Map<string, { index: number; count: number }>();
  let lastSweep = 0;
  return {
    driver: 'memory',
    async hit(key, windowMs) {
      const now = clock.now();
      const index = Math.floor(now / windowMs);
      if (now - lastSweep > windowMs) {
        lastSweep = now;
        for (const [k, w] of windows) if (w.index < index) windows.delete(k);
      }
      const current = windows.get(key);
      const entry = current && current.index === index ? current : { index, count: 0 };
      entry.count += 1;
      windows.set(key, entry);
      return { count: entry.count, resetMs: (index + 1) * windowMs - now };
    },
    async close() {
      windows.clear();
    },
  };
}
