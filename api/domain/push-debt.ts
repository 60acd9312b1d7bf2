/**
 * Changes lost to other nodes by a node cut off from Redis while they are not (a partition of one
 * node). Such a node still serves REST requests and provider webhooks on the store, but what it
 * announces reaches no other node: its bus messages (caches to drop, sessions and windows to end)
 * and its pushes (widget states, windows' work) both go through Redis. The other nodes' buses are
 * up, so nothing tells them: their own outage catch-up (gateway/catch-up.ts) runs only while their
 * own bus is down, and the cut-off node's `resync` comes only once it is back. Until then their
 * widgets would show an answered call still ringing, from a socket that polls once a minute and
 * from caches a minute old, and their windows would get commands only at their next heartbeat.
 *
 * So the store, which every node still shares, carries the news. A node whose bus is down counts
 * each change it announces in the sequence `push_debt` (and once as it finds its bus down, for
 * what it announced before it knew), one bump at a time: a bump asked for while
 * one is under way is made once more after it, so the last change is always counted after it was
 * made. Every node whose bus is up reads the sequence every poll_ms, and when other nodes' counts
 * moved it, the node hears `resync`, as if its own bus had just come back: its caches empty, and a
 * gateway catches its sockets up from the store. The reads cost one statement per node every
 * poll_ms, outage or not; the catch-ups come only with a partition.
 */
import { LIMITS } from '../../shared/limits.js';
import type { Bus } from '../bus/index.js';
import type { Clock, Timer } from '../clock.js';
import type { Db } from '../store/index.js';

export interface PushDebtDeps {
  db: Db;
  bus: Bus;
  clock: Clock;
  log?: (message: string, error?: unknown) => void;
  /** a count this node made (`counted`), or a moved count it read and read everything again for (`heard`): for the metrics */
  observeDebt?: (event: 'counted' | 'heard') => void;
}

export interface PushDebt {
  /** a count is being made, or waits to be tried again (a short-lived node, c2c, waits for it before it closes) */
  pending(): boolean;
  stop(): void;
}

/** Starts counting this node's lost announcements and watching other nodes'. */
export function trackPushDebt({ db, bus, clock, log, observeDebt }: PushDebtDeps): PushDebt {
  // One process on the in-process bus: no other node to lose anything to.
  if (bus.driver === 'memory') return { pending: () => false, stop: () => {} };
  let stopped = false;
  let bumping = false;
  let bumpAgain = false;
  let retry: Timer | undefined;
  /** the count last read (undefined until a first read succeeds: the baseline) */
  let seen: number | undefined;
  /**
   * counts this node made since it last read: what it finds of them once its bus is back is its
   * own, and needs nothing (its caches were bypassed while its bus was down, its sockets caught up,
   * and its reconnect's `resync` follows). Reading everything again for them would only repeat that.
   */
  let mine = 0;
  let tick: Timer | undefined;
  let reading = false;

  async function bump(): Promise<void> {
    if (bumping) return void (bumpAgain = true);
    bumping = true;
    try {
      do {
        bumpAgain = false;
        await db.query("SELECT nextval('push_debt')");
        mine += 1;
        observeDebt?.('counted');
      } while (bumpAgain && !stopped);
    } catch (error) {
      // The store is away too (the change was most likely refused with it): counted again once it answers.
      log?.('could not record a change other nodes missed', error);
      retry ??= clock.after(LIMITS.pollMs, () => {
        retry = undefined;
        if (!stopped) void bump();
      });
    } finally {
      bumping = false;
    }
  }

  async function read(): Promise<void> {
    if (reading || bus.state() !== 'up') return;
    reading = true;
    try {
      const [row] = await db.query<{ last_value: string | number; is_called: boolean }>('SELECT last_value, is_called FROM push_debt');
      const count = row?.is_called ? Number(row.last_value) : 0;
      // The first read is the baseline, counts this node made before it included.
      if (seen === undefined) mine = 0;
      const moved = seen === undefined ? 0 : count - seen;
      // Another node's count is one this node did not make. (Racing a count of this node's, a read
      // that saw it before the node did reads everything again for nothing; one the node saw first
      // can hide another node's count until the next read: one tick late, never missed.)
      const others = moved - mine;
      mine = Math.max(0, mine - moved);
      seen = count;
      if (others > 0 && !stopped) {
        observeDebt?.('heard');
        bus.resyncHere();
      }
    } catch (error) {
      log?.('could not read the changes other nodes missed', error);
    } finally {
      reading = false;
    }
  }

  const unsubscribe = bus.subscribe((message, { local }) => {
    // `resync` is the bus's own news; every other message this node announces while its bus is down may be lost to other nodes
    if (local && message.type !== 'resync' && bus.state() === 'down') void bump();
  });
  // A node finds its Redis gone only some seconds after it went (a connection cut without a word
  // is found by the liveness probe, 10 s on): what it announced meanwhile went into a dead
  // connection, lost to the other nodes with nothing to count it by. So the moment it finds its
  // bus down counts once too, for them.
  let wasUp = bus.state() === 'up';
  const schedule = () => {
    tick = clock.after(LIMITS.pollMs, () => {
      if (stopped) return;
      schedule();
      const up = bus.state() === 'up';
      if (wasUp && !up) void bump();
      wasUp = up;
      return read();
    });
  };
  void read();
  schedule();

  return {
    pending: () => bumping || retry !== undefined,
    stop() {
      stopped = true;
      unsubscribe();
      tick?.cancel();
      retry?.cancel();
      retry = undefined;
    },
  };
}
