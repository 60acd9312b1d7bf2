/** The clock and timers the browser-side helpers in shared/ run on (the SDK passes its own Clock). */
export interface Timers<H> {
  now(): number;
  after(ms: number, fn: () => void): H;
  cancel(handle: H | undefined): void;
}

export const systemTimers: Timers<ReturnType<typeof setTimeout>> = {
  now: () => Date.now(),
  after: (ms, fn) => setTimeout(fn, ms),
  cancel: (handle) => clearTimeout(handle),
};
