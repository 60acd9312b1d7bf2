/**
 * The platform-wide switch (spec section 1: "Disabling the service platform-wide makes every
 * endpoint refuse immediately"). Read on every request, so it is cached in memory and the cache is
 * set by a bus message from whichever node flipped it; while the bus is down (such a message
 * could be lost) every request reads the store. Reads are coalesced (api/store/coalesce.ts): the
 * requests of one moment, a restarted node's first thousand say, make one statement. A read that a
 * message overtook does not overwrite what the message said.
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
  bus.subscribe((message) => {
    if (message.type !== 'platform' && message.type !== 'resync') return;
    generation += 1;
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

  const isDisabled = async (): Promise<boolean> => (bus.state() === 'up' && cached !== undefined ? cached : read());

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
