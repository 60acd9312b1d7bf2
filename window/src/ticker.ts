/**
 * Tick sources for the heartbeat scheduler: the heartbeat Worker when it can be started, else the
 * page's own timer (throttled in background tabs, but better than nothing).
 */
import type { Ticker } from './heartbeat.js';

export const WORKER_SCRIPT = '/assets/js/click2call-heartbeat-worker.js';

/** Ticks from the page's own setInterval. */
export class TimerTicker implements Ticker {
  onTick: (() => void) | null = null;
  #timer: ReturnType<typeof setInterval> | undefined;

  setInterval(ms: number): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = ms > 0 ? setInterval(() => this.onTick?.(), ms) : undefined;
  }

  destroy(): void {
    this.setInterval(0);
  }
}

/** Ticks from the heartbeat Worker; falls back to the page's timer if the Worker fails. */
export class WorkerTicker implements Ticker {
  onTick: (() => void) | null = null;
  #worker: Worker | null;
  #fallback: TimerTicker | null = null;
  #interval = 0;

  constructor(worker: Worker) {
    this.#worker = worker;
    worker.onmessage = () => this.onTick?.();
    worker.onerror = () => this.#fallBack();
  }

  setInterval(ms: number): void {
    this.#interval = ms;
    if (this.#fallback) this.#fallback.setInterval(ms);
    else this.#worker?.postMessage({ interval: ms });
  }

  destroy(): void {
    this.#worker?.terminate();
    this.#worker = null;
    this.#fallback?.destroy();
  }

  #fallBack(): void {
    if (this.#fallback) return;
    this.#worker?.terminate();
    this.#worker = null;
    this.#fallback = new TimerTicker();
    this.#fallback.onTick = () => this.onTick?.();
    this.#fallback.setInterval(this.#interval);
  }
}

/** The Worker ticker if a Worker can be started here, else the timer ticker. */
export function createTicker(script = WORKER_SCRIPT): Ticker {
  try {
    if (typeof Worker === 'function') return new WorkerTicker(new Worker(script));
  } catch {
    // CSP or an old browser: use the page's timer.
  }
  return new TimerTicker();
}
