/** One virtual user: its own runtime (module state), `iterations` runs of the default function. */
import { parentPort, workerData } from 'node:worker_threads';
import { abandonAll, idle, record } from './modules/runtime.mjs';

const { script, vu, iterations, data, env } = workerData;
globalThis.__ENV = env;
globalThis.__VU = vu;
globalThis.__ITER = 0;

const errors = [];
const module = await import(script);
for (let iteration = 0; iteration < iterations; iteration += 1) {
  globalThis.__ITER = iteration;
  try {
    await module.default(JSON.parse(data));
    await idle(30_000);
  } catch (error) {
    errors.push(`VU ${vu} iteration ${iteration}: ${error?.message ?? error}`);
    abandonAll();
  }
}
parentPort.postMessage({ ...record, errors });
