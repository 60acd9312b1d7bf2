/**
 * A stopping gateway waits for a catch-up under way for a second at most (gateway/catch-up.ts):
 * one stuck on a struggling store (a statement timeout is 10 s) would hold the stop past the
 * node's 10 s bound, and the API's drain with it.
 */
import { describe, expect, it } from 'vitest';
import type { Server } from 'socket.io';
import { ManualClock } from '../../api/clock.js';
import type { Services } from '../../api/services.js';
import type { BusMessage } from '../../api/bus/index.js';
import { CATCH_UP_STOP_WAIT_MS, keepCurrentThroughOutages } from '../../gateway/catch-up.js';

describe('a stop during a catch-up', () => {
  it('waits for it CATCH_UP_STOP_WAIT_MS at most', async () => {
    const listeners: Array<(message: BusMessage) => void> = [];
    let asked = 0;
    const clock = new ManualClock();
    const services = {
      clock,
      pusher: {},
      bus: {
        state: () => 'up',
        subscribe: (listener: (message: BusMessage) => void) => {
          listeners.push(listener);
          return () => {};
        },
        // the catch-up's first step, which a store (here: Redis) that does not answer holds for good
        roomsJoined: () => {
          asked += 1;
          return new Promise<void>(() => {});
        },
      },
    } as unknown as Services;
    const io = { of: () => ({ sockets: new Map() }) } as unknown as Server;
    const stop = keepCurrentThroughOutages(services, io);
    for (const listener of listeners) listener({ type: 'resync' } as BusMessage);
    expect(asked).toBe(1); // a catch-up is under way, and will never finish
    let stopped = false;
    const stopping = stop().then(() => (stopped = true));
    await clock.advance(CATCH_UP_STOP_WAIT_MS - 1);
    expect(stopped).toBe(false);
    await clock.advance(1);
    await stopping;
    expect(stopped).toBe(true);
  });
});
