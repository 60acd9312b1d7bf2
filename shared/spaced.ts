/**
 * Calls `fn` at most once every `ms`. A call that comes sooner is not dropped but made once at the
 * end of the interval: what asked for it may have happened after the last call. For window
 * messages (SDK and call window), which any page holding the window could send in a flood.
 */
import type { Timers } from './timers.js';

export function spaced<H>(timers: Timers<H>, ms: number, fn: () => void): { call(): void; cancel(): void } {
  let last = -Infinity;
  let later: H | undefined;
  const call = (): void => {
    const wait = last + ms - timers.now();
    if (wait > 0) {
      later ??= timers.after(wait, () => {
        later = undefined;
        call();
      });
      return;
    }
    last = timers.now();
    fn();
  };
  return {
    call,
    cancel: () => {
      timers.cancel(later);
      later = undefined;
    },
  };
}
