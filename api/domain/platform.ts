/**
 * The platform-wide switch (spec section 1: "Disabling the service platform-wide makes every
 * endpoint refuse immediately"). Read on every request, so it is cached in memory and the cache is
 * set by a bus message from whichever node flipped it; while the bus is down (such a message
 * could be lost) every request reads the store, in one statement for the requests of one turn of
 * the event loop. Requests that find no cached value share one read (a restarted node's first
 * thousand), and a read that a message overtook does not overwrite it.
 */
import { C2CError } from '../../shared/errors.js';
import type { Bus } from '../bus/index.js';
import type { Clock } from '../clock.js';
import { coalesce } from '../store/coalesce.js';
import type { Db } from '../store/index.js';

export interface Platform {
  isDisabled(): Promise<boolean>;
  /** throws platform_disabled when the platform is off */
  assertEnabled(): Promise<void>;
  setDisabled(disabled: boolean): Promise<void>;
}

export function createPlatform(db: Db, bus: Bus, clock: Clock): Platform {
  let cached: boolean | undefined;
  /** bumped by every message that sets or drops `cached` */
  let generation = 0;
  let shared: Promise<boolean> | undefined;
  bus.subscribe((message) => {
    if (message.type !== 'platform' && message.type !== 'resync') return;
    generation += 1;
    shared = undefined;
    cached = message.type === 'platform' ? message.disabled : undefined;
  });

  // The reads asked for in one turn of the event loop (every request while the bus is down) are one.
  const readTogether = coalesce(async (callers: null[]) => {
    const [row] = await db.query<{ disabled: boolean }>('SELECT disabled FROM platform_settings WHERE id = 1');
    return callers.map(() => row?.disabled ?? false);
  });
  const read = async () => {
    const startedAt = generation;
    const disabled = await readTogether(null);
    if (generation === startedAt) cached = disabled;
    return disabled;
  };

  const isDisabled = async (): Promise<boolean> => {
    if (bus.state() !== 'up') return read();
    if (cached !== undefined) return cached;
    if (shared) return shared;
    const reading = read().finally(() => {
      if (shared === reading) shared = undefined;
    });
    shared = reading;
    return reading;
  };

  return {
    isDisabled,
    async assertEnabled() {
      if (await isDisabled()) throw new C2CError('platform_disabled');
    },
    async setDisabled(disabled) {
      await db.query(
        `INSERT INTO platform_settings (id, disabled, updated_at) VALUES (1, $1, $2)
         ON CONFLICT (id) DO UPDATE SET disabled = EXCLUDED.disabled, updated_at = EXCLUDED.updated_at`,
        [disabled, clock.now()],
      );
      cached = disabled;
      bus.publish({ type: 'platform', disabled });
    },
  };
}
