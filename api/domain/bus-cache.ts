/**
 * A cache whose entries the bus drops the moment something they depend on changes (anywhere, on
 * any node): credential checks per token, integrations, resolved agents. Revocation, disabling and
 * un-assigning therefore still apply on the next request. A load that overlapped an invalidation is
 * used once but not cached, so it cannot resurrect what the change removed. Loads of one key that
 * overlap share one read (a restarted node's first thousand requests of one integration make one),
 * unless a watched change came in between. While the bus is down nothing would say what changed on
 * other nodes, so the cache is bypassed (every read goes to the store, as the REST fallback does
 * anyway), and the reconnect (`resync`) empties it. A message lost without this node noticing (the
 * node that sent it killed, or restarted, while cut off from Redis) would leave an entry stale for
 * good: none is used older than MAX_AGE_MS, which bounds that (a revoked token's checks, say).
 */
import type { Bus, BusMessage } from '../bus/index.js';
import type { Clock } from '../clock.js';

const MAX_ENTRIES = 50_000;
/**
 * The oldest entry used: a store read per key a minute at most, against staleness for good. The
 * SDK's live check (LIVE_CHECK_MS in sdk/src/transport.ts) relies on it to see the store's state.
 */
export const BUS_CACHE_MAX_AGE_MS = 60_000;

export interface BusCache<T> {
  get(key: string): T | undefined;
  /** Loads through the cache's guard: a result is kept only if nothing changed meanwhile. */
  load<R extends T | undefined>(key: string, loader: () => Promise<R>): Promise<R>;
}

/**
 * `watches`: whether a message can make any entry stale (the frequent ones, such as agent version
 * bumps and engine work, must not: each watched message costs a scan); `affects`: whether it makes
 * this entry stale.
 */
export function createBusCache<T>(
  bus: Bus,
  clock: Clock,
  watches: (message: BusMessage) => boolean,
  affects: (entry: T, message: BusMessage) => boolean,
): BusCache<T> {
  const entries = new Map<string, { value: T; loadedAt: number }>();
  /** loads under way, with the generation they started in */
  const loading = new Map<string, { generation: number; entry: Promise<T | undefined> }>();
  let generation = 0;
  bus.subscribe((message) => {
    if (message.type !== 'resync' && !watches(message)) return;
    generation += 1;
    if (message.type === 'resync') return entries.clear();
    for (const [key, entry] of entries) if (affects(entry.value, message)) entries.delete(key);
  });
  return {
    get(key) {
      const entry = bus.state() === 'up' ? entries.get(key) : undefined;
      return entry && clock.now() - entry.loadedAt < BUS_CACHE_MAX_AGE_MS ? entry.value : undefined;
    },
    load<R extends T | undefined>(key: string, loader: () => Promise<R>): Promise<R> {
      const shared = loading.get(key);
      // One key has one loader: a read under way answers for this caller as well, if nothing changed since it began.
      if (shared && shared.generation === generation && bus.state() === 'up') return shared.entry as Promise<R>;
      const startedAt = generation;
      const entry = loader().then(
        (loaded) => {
          if (loading.get(key)?.entry === entry) loading.delete(key);
          if (loaded !== undefined && generation === startedAt && bus.state() === 'up') {
            if (entries.size >= MAX_ENTRIES) entries.clear();
            entries.set(key, { value: loaded, loadedAt: clock.now() });
          }
          return loaded;
        },
        (error: unknown) => {
          if (loading.get(key)?.entry === entry) loading.delete(key);
          throw error;
        },
      );
      loading.set(key, { generation: startedAt, entry });
      return entry;
    },
  };
}
