/** Heartbeat scheduling: the Worker's tick protocol, and the period switching between socket up and down (fake timers). */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { HeartbeatScheduler } from '../../window/src/heartbeat.js';
import { installTicker, type TickerScope } from '../../window/src/heartbeat-worker.js';
import { TimerTicker, WorkerTicker, createTicker } from '../../window/src/ticker.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

function scheduler(options: { heartbeatMs?: number; fallbackMs?: number } = {}) {
  const send = vi.fn(async () => {});
  const ticker = new TimerTicker();
  const hb = new HeartbeatScheduler({ ticker, send, heartbeatMs: options.heartbeatMs ?? 15_000, fallbackMs: options.fallbackMs ?? 3000 });
  return { hb, send, ticker };
}

describe('HeartbeatScheduler', () => {
  it('beats every heartbeat_fallback_ms while the socket is down and every heartbeat_ms while it is up', async () => {
    const { hb, send } = scheduler();
    hb.start();
    expect(hb.intervalMs).toBe(3000);
    await vi.advanceTimersByTimeAsync(9000);
    expect(send).toHaveBeenCalledTimes(3);

    hb.setSocketUp(true);
    expect(hb.intervalMs).toBe(15_000);
    await vi.advanceTimersByTimeAsync(14_999);
    expect(send).toHaveBeenCalledTimes(3);
    await vi.advanceTimersByTimeAsync(1);
    expect(send).toHaveBeenCalledTimes(4);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(send).toHaveBeenCalledTimes(6);

    hb.setSocketUp(false);
    await vi.advanceTimersByTimeAsync(3000);
    expect(send).toHaveBeenCalledTimes(7);
    await vi.advanceTimersByTimeAsync(6000);
    expect(send).toHaveBeenCalledTimes(9);
  });

  it('uses the fallback period during a call even with the socket up (call progress comes only in heartbeat answers)', async () => {
    const { hb, send } = scheduler();
    hb.start();
    hb.setSocketUp(true);
    hb.setOnCall(true);
    expect(hb.intervalMs).toBe(3000);
    await vi.advanceTimersByTimeAsync(6000);
    expect(send).toHaveBeenCalledTimes(2);
    hb.setOnCall(false);
    expect(hb.intervalMs).toBe(15_000);
    await vi.advanceTimersByTimeAsync(14_000);
    expect(send).toHaveBeenCalledTimes(2);
  });

  it('takes a new heartbeat_ms from the server', async () => {
    const { hb, send } = scheduler();
    hb.start();
    hb.setSocketUp(true);
    hb.setHeartbeatMs(20_000);
    await vi.advanceTimersByTimeAsync(19_999);
    expect(send).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(send).toHaveBeenCalledTimes(1);
  });

  it('sends nothing during a hold, not even the beat asked for while the refused one was in flight, and ticks again after it', async () => {
    let sent = 0;
    let refuse = true;
    const hb: HeartbeatScheduler = new HeartbeatScheduler({
      ticker: new TimerTicker(),
      send: async () => {
        sent += 1;
        await Promise.resolve(); // the answer comes later
        // the server refuses it as rate-limited: wait 10 s
        if (refuse) hb.holdFor(10_000);
      },
      heartbeatMs: 15_000,
      fallbackMs: 3000,
    });
    hb.start();
    const first = hb.beat();
    void hb.beat(); // asked for while the first is in flight
    await first;
    expect(sent).toBe(1);
    refuse = false;
    await hb.beat();
    await vi.advanceTimersByTimeAsync(9999); // ticks at 3, 6 and 9 s fall inside the hold
    expect(sent).toBe(1);
    await vi.advanceTimersByTimeAsync(2001); // the tick at 12 s
    expect(sent).toBe(2);
    await hb.beat();
    expect(sent).toBe(3);
  });

  it('never has two heartbeats in flight: an immediate beat during one is sent once, after it', async () => {
    let release!: () => void;
    const send = vi.fn(() => new Promise<void>((resolve) => (release = resolve)));
    const hb = new HeartbeatScheduler({ ticker: new TimerTicker(), send, heartbeatMs: 15_000, fallbackMs: 3000 });
    hb.start();
    const first = hb.beat();
    void hb.beat();
    void hb.beat();
    expect(send).toHaveBeenCalledTimes(1);
    release();
    await vi.advanceTimersByTimeAsync(0);
    expect(send).toHaveBeenCalledTimes(2);
    release();
    await first;
    expect(send).toHaveBeenCalledTimes(2);
  });

  it('stops ticking when stopped', async () => {
    const { hb, send } = scheduler();
    hb.start();
    await vi.advanceTimersByTimeAsync(3000);
    hb.stop();
    await vi.advanceTimersByTimeAsync(60_000);
    await hb.beat();
    expect(send).toHaveBeenCalledTimes(1);
  });
});

describe('heartbeat worker', () => {
  function fakeScope() {
    const scope: TickerScope & { posted: unknown[] } = { onmessage: null, posted: [], postMessage: (message) => scope.posted.push(message) };
    installTicker(scope);
    const send = (interval: number) => scope.onmessage!({ data: { interval } } as MessageEvent);
    return { scope, send };
  }

  it('posts a tick every requested interval, restarts on a new interval and stops on 0', async () => {
    const { scope, send } = fakeScope();
    send(3000);
    await vi.advanceTimersByTimeAsync(9000);
    expect(scope.posted).toEqual([{ type: 'tick' }, { type: 'tick' }, { type: 'tick' }]);
    await vi.advanceTimersByTimeAsync(1000);
    send(15_000);
    await vi.advanceTimersByTimeAsync(14_999);
    expect(scope.posted).toHaveLength(3);
    await vi.advanceTimersByTimeAsync(1);
    expect(scope.posted).toHaveLength(4);
    send(0);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(scope.posted).toHaveLength(4);
  });

  it('WorkerTicker drives the worker by messages and falls back to the page timer when the worker fails', async () => {
    const worker = { postMessage: vi.fn(), terminate: vi.fn(), onmessage: null as null | ((e: unknown) => void), onerror: null as null | ((e: unknown) => void) };
    const ticker = new WorkerTicker(worker as unknown as Worker);
    const ticks = vi.fn();
    ticker.onTick = ticks;
    ticker.setInterval(3000);
    expect(worker.postMessage).toHaveBeenLastCalledWith({ interval: 3000 });
    worker.onmessage!({ data: { type: 'tick' } });
    expect(ticks).toHaveBeenCalledTimes(1);
    worker.onerror!(new Event('error'));
    expect(worker.terminate).toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(6000);
    expect(ticks).toHaveBeenCalledTimes(3);
    ticker.destroy();
    await vi.advanceTimersByTimeAsync(6000);
    expect(ticks).toHaveBeenCalledTimes(3);
  });

  it('createTicker uses the page timer when no Worker can be started', () => {
    vi.stubGlobal('Worker', function Refused() {
      throw new Error('blocked by CSP');
    });
    expect(createTicker()).toBeInstanceOf(TimerTicker);
  });
});
