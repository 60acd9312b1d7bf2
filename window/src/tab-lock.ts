/**
 * One tab per engine. A duplicated tab ("Duplicate tab") starts with a copy of this tab's
 * sessionStorage, the stored pairing included: restored, the copy would run the same engine
 * beside the original (both heartbeating, both ringing, both claiming one dial request), and
 * closing the copy would close the engine (its pagehide) under the original, perhaps mid-call.
 * The tab that runs an engine holds a Web Lock named for it for as long as the page lives; a tab
 * that finds it held leaves the pairing to the one running it. Where Web Locks are missing, there
 * is nothing to tell the tabs apart by, and every tab may run it (as before).
 */
export type LockManagerLike = Pick<LockManager, 'request'>;

/**
 * This page's hold on engines' locks: `hold(engineId)` takes the engine's lock for the life of the
 * page, true once held (a second ask from this page, a Try again, finds it held already), false
 * when another tab holds it.
 */
export function tabLocks(locks: LockManagerLike | undefined): (engineId: string) => Promise<boolean> {
  const held = new Set<string>();
  return async (engineId) => {
    if (!locks || held.has(engineId)) return true;
    const taken = await new Promise<boolean>((resolve) => {
      locks
        .request(`c2c.engine:${engineId}`, { ifAvailable: true }, (lock) => {
          resolve(lock !== null);
          // held until the page goes (the browser releases a closed page's locks)
          return lock ? new Promise<void>(() => {}) : undefined;
        })
        .catch(() => resolve(true));
    });
    if (taken) held.add(engineId);
    return taken;
  };
}
