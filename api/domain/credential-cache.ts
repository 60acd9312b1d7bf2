/**
 * A per-token cache of credential checks for the hot paths (widget polls, engine heartbeats). The
 * bus drops an entry the moment something it depends on changes (anywhere, on any node), so
 * revocation, disabling and un-assigning still apply on the next request. A load that overlapped an
 * invalidation is used once but not cached, so it cannot resurrect what the change removed.
 */
import type { Bus, BusMessage } from '../bus/index.js';

const MAX_ENTRIES = 50_000;

export interface CredentialCache<T> {
  get(lookup: string): T | undefined;
  /** Loads through the cache's guard: a result is kept only if nothing changed meanwhile. */
  load<R extends T | undefined>(lookup: string, loader: () => Promise<R>): Promise<R>;
}

/**
 * `watches`: the message types that can make an entry stale (others, such as the frequent agent
 * version bumps, never disturb the cache); `affects` says whether one does.
 */
export function createCredentialCache<T>(
  bus: Bus,
  watches: ReadonlyArray<BusMessage['type']>,
  affects: (entry: T, message: BusMessage) => boolean,
): CredentialCache<T> {
  const entries = new Map<string, T>();
  let generation = 0;
  bus.subscribe((message) => {
    if (message.type !== 'resync' && !watches.includes(message.type)) return;
    generation += 1;
    if (message.type === 'resync') return entries.clear();
    for (const [lookup, entry] of entries) if (affects(entry, message)) entries.delete(lookup);
  });
  return {
    get: (lookup) => entries.get(lookup),
    async load(lookup, loader) {
      const startedAt = generation;
      const entry = await loader();
      if (entry !== undefined && generation === startedAt) {
        if (entries.size >= MAX_ENTRIES) entries.clear();
        entries.set(lookup, entry);
      }
      return entry;
    },
  };
}
