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

let pending = 0;

export function hold() {
  pending += 1;
  let released = false;
  return () => {
    if (!released) {
      released = true;
      pending -= 1;
    }
  };
}

export function add(metric, value) {
  (record.metrics[metric] = record.metrics[metric] || []).push(value);
}

/** Resolves once nothing is pending, or rejects after `ms`. */
export async function idle(ms) {
  const until = Date.now() + ms;
  while (pending > 0) {
    if (Date.now() > until) throw new Error(`the iteration left ${pending} timer(s) or WebSocket(s) pending for ${ms} ms: under k6 it would not end`);
    await new Promise((resolve) => globalThis.setTimeout(resolve, 5));
  }
}
