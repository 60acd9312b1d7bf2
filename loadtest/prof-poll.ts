/**
 * Profiles the poll path: starts a node with the demo tenant, prints a widget token, records a
 * CPU profile for PROF_SECONDS while something else (loadtest/lib/cannon.mjs) drives load, and
 * writes it to PROF_OUT. A development aid for `npm run bench:rest`'s poll figure.
 */
import { writeFileSync, mkdtempSync, readFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../api/config.js';
import { startNode } from '../api/serve.js';

const dataDir = mkdtempSync(join(tmpdir(), 'c2c-prof-'));
const config = loadConfig({ PORT: process.env.PORT ?? '8111', DEMO_PORT: '0', C2C_DATA_DIR: dataDir, LOG_LEVEL: 'warn', C2C_RATE_LIMIT_SCALE: '10000' });
const node = await startNode(config, { demo: true, logger: false });
const demo = JSON.parse(readFileSync(join(dataDir, 'demo.json'), 'utf8'));
const session = await (
  await fetch(`${node.url}/api/v1/click2call/sessions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${demo.server_key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ integration_id: demo.integration_id, agent: demo.agent, origin: demo.allowed_origin }),
  })
).json();
const profiling = process.env.PROF_OUT !== 'none';
const inspector = new Session();
if (profiling) {
  inspector.connect();
  await inspector.post('Profiler.enable');
  await inspector.post('Profiler.start');
}
console.log(JSON.stringify({ token: session.widget_token, origin: demo.allowed_origin }));
setTimeout(async () => {
  if (profiling) {
    const { profile } = await inspector.post('Profiler.stop');
    writeFileSync(process.env.PROF_OUT ?? '/tmp/poll.cpuprofile', JSON.stringify(profile));
  }
  await node.close();
  process.exit(0);
}, Number(process.env.PROF_SECONDS ?? 12) * 1000);
