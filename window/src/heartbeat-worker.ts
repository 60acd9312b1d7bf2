/**
 * Entry of click2call-heartbeat-worker.js: a dedicated Worker that posts {type:'tick'} every
 * `interval` ms. Background tabs clamp the page's own timers (to once a minute in Chrome after a
 * while); a Worker's timers keep their period, so heartbeats stay on time in a hidden call window.
 * Messages in: {interval: ms} (re)starts the period, the first tick one period later; 0 stops.
 */

export interface TickerScope {
  onmessage: ((event: MessageEvent) => void) | null;
  postMessage(message: unknown): void;
}

/** Wires the tick protocol onto a worker scope (exported for the unit tests). */
export function installTicker(scope: TickerScope, timers: Pick<typeof globalThis, 'setInterval' | 'clearInterval'> = globalThis): void {
  let timer: ReturnType<typeof setInterval> | undefined;
  scope.onmessage = (event: MessageEvent) => {
    const interval = Number((event.data as { interval?: unknown } | null)?.interval);
    if (timer !== undefined) timers.clearInterval(timer);
    timer = undefined;
    if (Number.isFinite(interval) && interval > 0) timer = timers.setInterval(() => scope.postMessage({ type: 'tick' }), interval);
  };
}

declare const WorkerGlobalScope: { new (): unknown } | undefined;

if (typeof WorkerGlobalScope !== 'undefined' && self instanceof WorkerGlobalScope) {
  installTicker(self as unknown as TickerScope);
}
