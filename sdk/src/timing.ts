/**
 * Time in the SDK: an injectable clock (tests move it with fake timers or their own), full-jitter
 * backoff (shared with the call window: shared/backoff.ts), and the token refresh schedule. Pure
 * functions where possible.
 */
export type TimerHandle = ReturnType<typeof setTimeout>;

export interface Clock {
  /** local time, ms */
  now(): number;
  after(ms: number, fn: () => void): TimerHandle;
  cancel(handle: TimerHandle | undefined): void;
}

/** The browser's clock, read at call time (so vitest's fake timers replace it too). */
export const systemClock: Clock = {
  now: () => Date.now(),
  after: (ms, fn) => setTimeout(fn, ms),
  cancel: (handle) => handle !== undefined && clearTimeout(handle),
};

export { fullJitter, spreadWait } from '../../shared/backoff.js';

/** The refresh margin: 60 s before expiry, or 20 % of the remaining time when that is shorter. */
export const REFRESH_MARGIN_MS = 60_000;
export const REFRESH_SHARE = 0.2;

/**
 * When to refresh a widget token, in ms from now: `remaining − min(60 s, 20 % of remaining)`,
 * so a 30-minute token refreshes 60 s before it expires and a 100 s token at 80 s.
 * `expiresAt` is in server seconds; `serverNowMs` is the server's clock as the SDK estimates it.
 */
export function refreshDelayMs(expiresAt: number, serverNowMs: number): number {
  const remaining = expiresAt * 1000 - serverNowMs;
  if (remaining <= 0) return 0;
  return Math.round(remaining - Math.min(REFRESH_MARGIN_MS, remaining * REFRESH_SHARE));
}

/** A request id for a command (crypto.randomUUID where the page is a secure context). */
export function newRequestId(): string {
  const c = globalThis.crypto;
  if (c && typeof c.randomUUID === 'function') return c.randomUUID();
  const bytes = new Uint8Array(16);
  c.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}
