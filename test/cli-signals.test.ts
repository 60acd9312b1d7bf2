/**
 * How `c2c serve` takes SIGTERM and SIGINT (api/cli/signals.ts): the first starts the stop, a
 * second exits at once (but the first's echo within a second), and a stop that outlasts its deadline exits anyway; the deadline starts
 * again when the stop itself begins, so a slow start does not eat it. The process-level behaviour
 * (a signal during start-up) is in serve-process.test.ts.
 */
import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ECHO_MS, STOP_DEADLINE_MS, stopSignal } from '../api/cli/signals.js';
import { DRAIN_MS, PUSHES_SETTLE_MS } from '../api/serve.js';
import { CLOSE_WAIT_MS } from '../api/store/pg.js';
import { CATCH_UP_STOP_WAIT_MS } from '../gateway/catch-up.js';
import { REQUESTS_SETTLE_MS } from '../gateway/server.js';

describe('stopping on a signal', () => {
  it("leaves a stop on a struggling store every wait it has in turn, with a second to spare, before the deadline exits 1 (a failed unit under systemd)", () => {
    // the gateway's requests and its catch-up side by side, then the API's drain, the last pushes, the store's statements
    const worst = Math.max(REQUESTS_SETTLE_MS, CATCH_UP_STOP_WAIT_MS) + DRAIN_MS + PUSHES_SETTLE_MS + CLOSE_WAIT_MS;
    expect(worst + 1000).toBeLessThanOrEqual(STOP_DEADLINE_MS);
  });

  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  const watch = () => {
    const signals = new EventEmitter();
    const logged: string[] = [];
    const exit = vi.fn();
    const stop = stopSignal((message) => logged.push(message), exit, signals);
    return { signals, logged, exit, stop };
  };

  it('starts the stop on the first signal and exits at once on a second, saying so', async () => {
    const { signals, logged, exit, stop } = watch();
    signals.emit('SIGTERM', 'SIGTERM');
    expect(await stop.received).toBe('SIGTERM');
    expect(exit).not.toHaveBeenCalled();
    signals.emit('SIGINT', 'SIGINT');
    expect(exit).toHaveBeenCalledWith(1);
    expect(logged).toEqual(['SIGTERM: shutting down', 'SIGINT again: exiting without finishing the shutdown']);
  });

  it("takes the same signal again within a second for the first one's echo (npm forwards what the terminal or the process group sent node too); later, it insists", async () => {
    const { signals, logged, exit, stop } = watch();
    signals.emit('SIGINT', 'SIGINT');
    await stop.received;
    signals.emit('SIGINT', 'SIGINT');
    expect(exit).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(ECHO_MS);
    signals.emit('SIGINT', 'SIGINT');
    expect(exit).toHaveBeenCalledWith(1);
    expect(logged).toEqual(['SIGINT: shutting down', 'SIGINT again: exiting without finishing the shutdown']);
  });

  it('exits at the deadline, counted again from when the stop itself begins', async () => {
    const { signals, logged, exit, stop } = watch();
    signals.emit('SIGTERM', 'SIGTERM');
    await stop.received;
    await vi.advanceTimersByTimeAsync(STOP_DEADLINE_MS / 2); // a slow start
    stop.closing();
    await vi.advanceTimersByTimeAsync(STOP_DEADLINE_MS / 2 + 1);
    expect(exit).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(STOP_DEADLINE_MS / 2);
    expect(exit).toHaveBeenCalledWith(1);
    expect(logged.at(-1)).toBe(`the shutdown did not finish within ${STOP_DEADLINE_MS / 1000} s: exiting`);
  });

  it('exits at the deadline when the start never ends', async () => {
    const { signals, exit } = watch();
    signals.emit('SIGINT', 'SIGINT');
    await vi.advanceTimersByTimeAsync(STOP_DEADLINE_MS);
    expect(exit).toHaveBeenCalledWith(1);
  });
});
