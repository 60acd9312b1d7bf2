/** One tab per engine: a duplicated tab finds the engine's Web Lock held and leaves the pairing alone. */
import { describe, expect, it } from 'vitest';
import { tabLocks, type LockManagerLike } from '../../window/src/tab-lock.js';

/** Web Locks as a browser keeps them across the tabs of one origin: a held name is not given again. */
function browserLocks() {
  const held = new Set<string>();
  const manager: LockManagerLike = {
    request: (async (name: string, options: LockOptions, callback: (lock: Lock | null) => unknown) => {
      if (options.ifAvailable && held.has(name)) return callback(null);
      held.add(name);
      return callback({ name, mode: 'exclusive' } as Lock);
    }) as LockManagerLike['request'],
  };
  return { manager, held };
}

describe('tab locks', () => {
  it('the tab running an engine holds it; a duplicated tab is refused it; the holder asking again still has it', async () => {
    const { manager, held } = browserLocks();
    const original = tabLocks(manager);
    const copy = tabLocks(manager);
    expect(await original('eng_1')).toBe(true);
    expect(held.has('c2c.engine:eng_1')).toBe(true);
    expect(await copy('eng_1')).toBe(false);
    // Try again in the original (a restore that could not reach the service) is not "another tab"
    expect(await original('eng_1')).toBe(true);
    // another engine is another lock
    expect(await copy('eng_2')).toBe(true);
  });

  it('without Web Locks (or when asking fails) every tab may run it, as before', async () => {
    expect(await tabLocks(undefined)('eng_1')).toBe(true);
    const broken: LockManagerLike = { request: (async () => Promise.reject(new Error('SecurityError'))) as LockManagerLike['request'] };
    expect(await tabLocks(broken)('eng_1')).toBe(true);
  });
});
