/**
 * Runs a k6 script under the stand-in: node --import ./register.mjs run.mjs <script>
 * setup() here, then options.scenarios' first scenario (per-vu-iterations: vus × iterations),
 * each virtual user in a worker thread of its own, then teardown(data). Prints one JSON line:
 * {checks, metrics, http, errors}, and exits 1 if any iteration threw.
 */
import { Worker } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import { record } from './modules/runtime.mjs';

globalThis.__ENV = { ...process.env };
globalThis.__VU = 0;
globalThis.__ITER = 0;

const script = pathToFileURL(resolve(process.argv[2])).href;
const module = await import(script);
const scenario = Object.values(module.options?.scenarios ?? {})[0];
if (!scenario || scenario.executor !== 'per-vu-iterations') throw new Error('the stand-in runs one per-vu-iterations scenario');

const errors = [];
const data = module.setup ? await module.setup() : undefined;

const results = await Promise.all(
  Array.from({ length: scenario.vus }, (_, index) => {
    const worker = new Worker(new URL('./vu.mjs', import.meta.url), {
      workerData: { script, vu: index + 1, iterations: scenario.iterations, data: JSON.stringify(data ?? null), env: globalThis.__ENV },
      execArgv: process.execArgv,
    });
    return new Promise((done, failed) => {
      worker.once('message', done);
      worker.once('error', failed);
    });
  }),
);
if (module.teardown) await module.teardown(data);

const merged = { checks: { ...record.checks }, metrics: { ...record.metrics }, http: { ...record.http, statuses: { ...record.http.statuses } }, errors };
for (const result of results) {
  for (const [name, entry] of Object.entries(result.checks)) {
    const into = (merged.checks[name] ??= { passes: 0, fails: 0 });
    into.passes += entry.passes;
    into.fails += entry.fails;
  }
  for (const [name, values] of Object.entries(result.metrics)) (merged.metrics[name] ??= []).push(...values);
  merged.http.requests += result.http.requests;
  merged.http.failed += result.http.failed;
  for (const [key, n] of Object.entries(result.http.statuses)) merged.http.statuses[key] = (merged.http.statuses[key] ?? 0) + n;
  errors.push(...result.errors);
}
process.stdout.write(`${JSON.stringify(merged)}\n`);
process.exit(errors.length > 0 ? 1 : 0);
