// Runs one autocannon measurement in its own process (so the load generator does not share the
// server's event loop) and prints a JSON summary on stdout. Usage: node cannon.mjs <spec.json>
// spec: {url, method, headers, connections, duration | amount, body?, bodies?: string[]}
// With `bodies`, every request takes the next body of the list, across all connections.
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';

const spec = JSON.parse(readFileSync(process.argv[2], 'utf8'));
let next = 0;
const result = await autocannon({
  url: spec.url,
  method: spec.method ?? 'GET',
  headers: spec.headers ?? {},
  body: spec.body,
  connections: spec.connections ?? 10,
  ...(spec.amount ? { amount: spec.amount } : { duration: spec.duration ?? 10 }),
  requests: spec.bodies ? [{ setupRequest: (request) => ({ ...request, body: spec.bodies[next++ % spec.bodies.length] }) }] : undefined,
});
const codes = Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, stats]) => [code, stats.count]));
process.stdout.write(
  JSON.stringify({
    requests: result.requests.total,
    rps: result.requests.average,
    latency_ms: { p50: result.latency.p50, p99: result.latency.p99, mean: result.latency.average },
    status_codes: codes,
    errors: result.errors,
    timeouts: result.timeouts,
    duration_s: result.duration,
  }),
);
