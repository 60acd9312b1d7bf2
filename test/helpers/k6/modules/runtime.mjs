/**
 * What one runtime (the setup, or a virtual user) records, and its event loop's pending work: k6
 * ends an iteration only once the timers and WebSockets it started are done.
 */
export const record = {
  checks: {},
  metrics: {},
  http: { requests: 0, failed: 0, statuses: {} },
  logs: [],
};

/** what keeps the iteration open: each with how to drop it when k6 would abandon it */
const pending = new Set();

/** Keeps the iteration open until the returned release is called; `abandon` drops the work (an iteration that threw). */
export function hold(abandon) {
  const entry = { abandon };
  pending.add(entry);
  return () => pending.delete(entry);
}

/**
 * An iteration that threw: k6 cancels it and runs none of its queued work, so its timers never
 * fire and its sockets go without a close frame. Dropped here alike.
 */
export function abandonAll() {
  for (const entry of [...pending]) {
    pending.delete(entry);
    entry.abandon?.();
  }
}

export function add(metric, value) {
  (record.metrics[metric] = record.metrics[metric] || []).push(value);
}

/** Resolves once nothing is pending, or rejects after `ms`. */
export async function idle(ms) {
  const until = Date.now() + ms;
  while (pending.size > 0) {
    if (Date.now() > until) throw new Error(`the iteration left ${pending.size} timer(s) or WebSocket(s) pending for ${ms} ms: under k6 it would not end`);
    await new Promise((resolve) => globalThis.setTimeout(resolve, 5));
  }
}
