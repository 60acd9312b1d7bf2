/**
 * npm run bench:rest — REST throughput on each store driver (issue "Call lifecycle"):
 * - the poll path, GET /widget/state, unconditional (200) and conditional (If-None-Match → 304);
 * - POST /calls creating new intents (each request a different ready agent → 202);
 * - beside them, in the same run, a bare fastify route answering JSON of the same size.
 * Target: the poll path reaches at least 0.7× the bare route. Load comes from autocannon in a
 * separate process; rate limits are scaled up because one client address stands for thousands
 * of agents. Knobs: BENCH_ROUNDS (5 interleaved rounds), BENCH_SECONDS (5 per measurement).
 * Results: loadtest/results/rest.json.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { loadConfig } from '../api/config.js';
import { createMember } from '../api/domain/operator/accounts.js';
import { setPolicy } from '../api/domain/operator/integrations.js';
import { issueTicket } from '../api/domain/tickets.js';
import { authenticateServerKey } from '../api/domain/server-keys.js';
import { DEMO } from '../api/demo/seed.js';
import { startNode } from '../api/serve.js';
import { cannon, scratchDatabase, writeResult, type CannonResult } from './lib/run.js';

const DURATION_S = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONNECTIONS = 20;
const CALL_AGENTS = Number(process.env.BENCH_CALL_AGENTS ?? 500);
const ready = () => ({ state: 'ready' as const, mic_ready: true, busy: false, muted: false, call_id: null, acks: [] });

interface DriverResult {
  driver: string;
  bare: CannonResult;
  poll: CannonResult;
  poll_304: CannonResult;
  post_calls: CannonResult;
  rounds: Array<{ bare_rps: number; poll_rps: number; poll_304_rps: number }>;
  poll_vs_bare: number;
  poll_304_vs_bare: number;
  body_bytes: number;
}

async function benchDriver(driver: 'pglite' | 'pg'): Promise<DriverResult> {
  const dataDir = mkdtempSync(join(tmpdir(), 'c2c-bench-'));
  const database = driver === 'pg' ? await scratchDatabase(process.env.DATABASE_URL!) : undefined;
  const config = loadConfig({ PORT: '0', DEMO_PORT: '0', C2C_DATA_DIR: dataDir, LOG_LEVEL: 'warn', C2C_RATE_LIMIT_SCALE: '10000', ...(database ? { DATABASE_URL: database.url } : {}) });
  const node = await startNode(config, { demo: true, logger: false });
  const { services } = node;
  const deps = { db: services.db, bus: services.bus, clock: services.clock };
  const origin = `http://127.0.0.1:${config.demoPort}`;
  try {
    await setPolicy(deps, DEMO.integrationId, { concurrencyLimit: 1_000_000 });
    const serverKey = (JSON.parse(readFileSync(join(dataDir, 'demo.json'), 'utf8')) as { server_key: string }).server_key;
    const { integration, keyId } = await authenticateServerKey(services.db, serverKey);

    const readyAgent = async (email: string) => {
      const session = await services.sessions.create(integration, keyId, { integration_id: DEMO.integrationId, agent: { type: 'email', value: email }, origin });
      const widget = await services.sessions.authenticate(session.token, origin);
      const ticket = await issueTicket(services.db, services.clock, config.siteUrl, widget);
      const pairing = await services.engines.pair({ ticket: ticket.ticket, simulated: false, client: 'window' });
      // A heartbeat reporting the same state changes nothing the widget sees (same version, same ETag).
      const heartbeat = async () => void (await services.engines.heartbeat(await services.engines.authenticate(pairing.token), ready(), 'rest'));
      await heartbeat();
      return { token: session.token, heartbeat };
    };
    const polled = await readyAgent(DEMO.agent.email);
    const pollToken = polled.token;

    const stateUrl = `${node.url}/api/v1/click2call/widget/state`;
    const pollHeaders = { authorization: `Bearer ${pollToken}`, origin };
    const sample = await fetch(stateUrl, { headers: pollHeaders });
    const body = await sample.text();
    const etag = sample.headers.get('etag')!;

    const bare = Fastify({ logger: false });
    const payload = JSON.parse(body);
    bare.get('/bare', async () => payload);
    await bare.listen({ port: 0, host: '127.0.0.1' });
    const bareUrl = `http://127.0.0.1:${(bare.server.address() as { port: number }).port}/bare`;
    const bareSize = (await (await fetch(bareUrl)).text()).length;

    // The three GET measurements are interleaved over several rounds and compared round by round,
    // so a noisy neighbour on this shared machine hits baseline and subject alike.
    const rounds: Array<{ bare: CannonResult; poll: CannonResult; poll_304: CannonResult }> = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      // Heartbeats keep the polled agent's window online (90 s of silence would change its state).
      await polled.heartbeat();
      rounds.push({
        bare: await cannon({ url: bareUrl, connections: CONNECTIONS, duration: DURATION_S }),
        poll: await cannon({ url: stateUrl, headers: pollHeaders, connections: CONNECTIONS, duration: DURATION_S }),
        poll_304: await cannon({ url: stateUrl, headers: { ...pollHeaders, 'if-none-match': etag }, connections: CONNECTIONS, duration: DURATION_S }),
      });
    }
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    const middle = (pick: (r: (typeof rounds)[number]) => CannonResult) => {
      const sorted = [...rounds].sort((a, b) => pick(a).rps - pick(b).rps);
      return pick(sorted[Math.floor(sorted.length / 2)]!);
    };
    for (const round of rounds) {
      if (Object.keys(round.poll_304.status_codes).join() !== '304') throw new Error(`the conditional poll did not stay 304: ${JSON.stringify(round.poll_304.status_codes)}`);
    }

    // One agent made ready (just now, so none has gone offline) per POST /calls request: each creates an intent.
    const emails: string[] = [];
    for (let i = 0; i < CALL_AGENTS; i += 1) {
      const member = await createMember(deps, { accountId: DEMO.accountId, email: `bench-${i}@demo.example`, name: `Bench ${i}`, departmentId: DEMO.sales });
      await readyAgent(member.email);
      emails.push(member.email);
    }
    const results = {
      bare: middle((r) => r.bare),
      poll: middle((r) => r.poll),
      poll_304: middle((r) => r.poll_304),
      post_calls: await cannon({
        url: `${node.url}/api/v1/click2call/calls`,
        method: 'POST',
        headers: { authorization: `Bearer ${serverKey}`, 'content-type': 'application/json' },
        connections: CONNECTIONS,
        amount: CALL_AGENTS,
        bodies: emails.map((email) => JSON.stringify({ integration_id: DEMO.integrationId, agent: { type: 'email', value: email }, phone_number: '+12025550123' })),
      }),
    };
    if (Object.keys(results.post_calls.status_codes).join() !== '202') throw new Error(`POST /calls did not create every intent: ${JSON.stringify(results.post_calls.status_codes)}`);
    const pollRatio = median(rounds.map((r) => r.poll.rps / r.bare.rps));
    const conditionalRatio = median(rounds.map((r) => r.poll_304.rps / r.bare.rps));
    await bare.close();
    if (bareSize !== body.length) throw new Error(`bare body ${bareSize} B differs from the state body ${body.length} B`);
    return {
      driver,
      ...results,
      rounds: rounds.map((r) => ({ bare_rps: r.bare.rps, poll_rps: r.poll.rps, poll_304_rps: r.poll_304.rps })),
      poll_vs_bare: pollRatio,
      poll_304_vs_bare: conditionalRatio,
      body_bytes: body.length,
    };
  } finally {
    await node.close();
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const drivers: Array<'pglite' | 'pg'> = process.env.DATABASE_URL ? ['pglite', 'pg'] : ['pglite'];
const out: DriverResult[] = [];
for (const driver of drivers) {
  const result = await benchDriver(driver);
  out.push(result);
  const row = (name: string, r: CannonResult) =>
    `  ${name.padEnd(22)} ${r.rps.toFixed(0).padStart(7)} req/s   p99 ${String(r.latency_ms.p99).padStart(4)} ms   ${JSON.stringify(r.status_codes)}`;
  console.log(`\n${driver} (WidgetState ${result.body_bytes} B, ${CONNECTIONS} connections, ${ROUNDS} interleaved rounds of ${DURATION_S} s; median round shown)`);
  console.log(row('bare fastify route', result.bare));
  console.log(row('GET /widget/state', result.poll));
  console.log(row('  … If-None-Match 304', result.poll_304));
  console.log(row(`POST /calls (${CALL_AGENTS})`, result.post_calls));
  console.log(
    `  poll as the SDK polls it (If-None-Match, unchanged state) / bare = ${result.poll_304_vs_bare.toFixed(2)} (target ≥ 0.70: ${result.poll_304_vs_bare >= 0.7 ? 'met' : 'MISSED'})`,
  );
  console.log(`  unconditional poll (a changed state, full body) / bare = ${result.poll_vs_bare.toFixed(2)}`);
}
const file = writeResult('rest', { ran_at: new Date().toISOString(), node: process.version, cpus: (await import('node:os')).cpus().length, duration_s: DURATION_S, rounds: ROUNDS, connections: CONNECTIONS, results: out });
console.log(`\nwritten ${file}`);
