/**
 * How the SDK and the call window wait before trying again: full-jitter backoff, and a server's
 * retry_after spread out. One place, so a widget and a window behind the same address come back
 * from a refusal alike.
 */

/** Full jitter (AWS architecture blog): a uniform delay in [0, min(cap, base·2^attempt)). */
export function fullJitter(attempt: number, baseMs = 500, capMs = 30_000, random: () => number = Math.random): number {
  return Math.floor(random() * Math.min(capMs, baseMs * 2 ** Math.min(attempt, 30)));
}

/**
 * After a wait the server asked for (`retry_after`), a random share of it again, up to 30 s: the
 * clients one refusal held back (a call centre behind one address) do not all come back at once.
 */
export function spreadWait(waitMs: number, random: () => number = Math.random): number {
  return waitMs + Math.floor(random() * Math.min(waitMs, 30_000));
}

/**
 * A socket's next connect: after the backoff of its `attempt`th failure in a row, or, when the
 * server asked for a wait (`waitMs`, its retry_after), that wait spread out, whichever is longer.
 * The server's wait is a floor, not a pace: a node that keeps asking for the same short wait (one
 * cut off from its store, refusing every handshake) is not retried at that pace, by every client
 * it holds back, for as long as it lasts.
 */
export function reconnectWait(waitMs: number, attempt: number, backoff: { baseMs: number; capMs: number }, random: () => number = Math.random): number {
  const jitter = fullJitter(attempt, backoff.baseMs, backoff.capMs, random);
  return waitMs > 0 ? Math.max(spreadWait(waitMs, random), jitter) : jitter;
}
