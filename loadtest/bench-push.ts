/**
 * npm run bench:push — push delivery, side by side with baselines, in one run (issue "Push benchmark"):
 * (a) widget command → engine delivery latency (HDR p50/p99) across two gateway nodes over Redis, at
 *     BENCH_SOCKETS connected sockets (half widgets, half engines) and BENCH_RATE commands/s, beside
 *     the polling baseline (mean staleness poll_ms/2);
 * (b) server CPU per delivered broadcast message: our gateway, raw uWS app.publish, Socket.IO on
 *     Node's http server, each holding the same N connections of the same client processes;
 * (c) memory per held connection on each of them;
 * (d) N clients coming back after a gateway restart, against raw uWS accepting N fresh connections.
 * Servers are separate processes (CPU sampled inside each by the probe preload), load comes from
 * BENCH_WORKERS client processes. Everything started here is stopped here and the scratch database
 * dropped, also on failure, Ctrl-C or BENCH_TIMEOUT_S. Results: loadtest/results/push.json (full
 * scale), push-capacity.json (BENCH_OUT=push-capacity), else push-small.json; the first two are what
 * the "Push" section of docs/performance.md reports, rewritten after either run.
 *
 * Scale (env): BENCH_SOCKETS 10000, BENCH_RATE 1000, BENCH_EXTRA_RATES (lower rates first, same
 * sockets), BENCH_SECONDS 30, BENCH_WARMUP_SECONDS 5, BENCH_DRAIN_SECONDS 30, BENCH_WORKERS 4,
 * BENCH_HEARTBEAT_MS 15000, BENCH_BCAST_RATE 5, BENCH_BCAST_SECONDS 10, BENCH_INFLIGHT 100
 * (connection attempts in flight per client process), BENCH_PARTS abcd, BENCH_CLIENT wire (or
 * socket.io-client), BENCH_HISTORY 20 (past commands per agent), BENCH_TIMEOUT_S 2400,
 * BENCH_OUT, BENCH_DOCS=1 (rewrite the docs section anyway), BENCH_KEEP_LOGS=1, BENCH_PROFILE=1 (V8
 * CPU profiles of our nodes), BENCH_HEAP_SNAPSHOT_DIR (a heap snapshot of every server with each memory sample). Infrastructure: DATABASE_URL (a scratch database is created on that
 * server), REDIS_URL (its database BENCH_REDIS_DB, 9, unless the URL names one).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { busChannels } from '../api/bus/redis.js';
import { DEMO } from '../api/demo/seed.js';
import { scratchDatabase, writeResult } from './lib/run.js';
import { CAPACITY_OUT, docsBody, readResults, RECHECK_OUT } from './push/docs.js';
import { runPartA, type PartAResult } from './push/part-a.js';
import { Pool } from './push/pool.js';
import { killAllNow, machineCpu, ROOT, stopAll, type Proc } from './push/procs.js';
import { compare } from './push/compare.js';
import { judge, printTable, writeDocsSection, type Comparison } from './push/report.js';
import { c2c, freePort, limited, otherPids, postgresRoundTrips, readDemo, readyAgent, redisServerPid, restClient, seedHistory, seedMembers, startApi, startGatewayNode, type ReadyAgent, type StackEnv } from './push/stack.js';
import { round, sleep } from './push/stats.js';

const num = (name: string, fallback: number) => {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a non-negative number`);
  return value;
};

const SOCKETS = Math.max(2, Math.floor(num('BENCH_SOCKETS', 10_000) / 2) * 2);
const RATE = num('BENCH_RATE', 1000);
const EXTRA_RATES = (process.env.BENCH_EXTRA_RATES ?? '')
  .split(',')
  .filter((r) => r.trim() !== '')
  .map((r) => {
    const rate = Number(r);
    if (!(rate > 0)) throw new Error('BENCH_EXTRA_RATES must be a comma-separated list of positive rates');
    return rate;
  });
const DRAIN_S = num('BENCH_DRAIN_SECONDS', 30);
const SECONDS = num('BENCH_SECONDS', 30);
const WARMUP_S = num('BENCH_WARMUP_SECONDS', 5);
const WORKERS = Math.max(2, num('BENCH_WORKERS', 4));
const HEARTBEAT_MS = num('BENCH_HEARTBEAT_MS', 15_000);
const BCAST_RATE = num('BENCH_BCAST_RATE', 5);
const BCAST_SECONDS = num('BENCH_BCAST_SECONDS', 10);
const INFLIGHT = Math.max(1, num('BENCH_INFLIGHT', 100));
const PARTS = (process.env.BENCH_PARTS ?? 'abcd').toLowerCase();
/** the client workers' Socket.IO client (client-worker.ts reads the same variable) */
const CLIENT = process.env.BENCH_CLIENT === 'socket.io-client' ? 'socket.io-client' : 'wire';
const TIMEOUT_S = num('BENCH_TIMEOUT_S', 2400);
/** past commands per seeded agent: a live database has history (see seedHistory) */
const HISTORY = num('BENCH_HISTORY', 20);
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const FULL = SOCKETS === 10_000 && RATE === 1000 && SECONDS >= 30 && /a/.test(PARTS) && /[bcd]/.test(PARTS);
const OUT = process.env.BENCH_OUT ?? (FULL ? 'push' : 'push-small');
const AGENTS = SOCKETS / 2;

function redisUrl(): string {
  const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  if (url.pathname === '' || url.pathname === '/') url.pathname = `/${process.env.BENCH_REDIS_DB ?? 9}`;
  return url.toString();
}

/** The exact command of this run: the BENCH_* variables it was given, then the script. */
function commandLine(): string {
  const vars = Object.entries(process.env)
    .filter(([name, value]) => name.startsWith('BENCH_') && value !== undefined && value !== '')
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, value]) => `${name}=${value}`);
  return [...vars, 'npm run bench:push'].join(' ');
}

/** The open-files limit this process (and so every child) runs under. */
function openFilesLimit(): number {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  const soft = line?.split(/\s{2,}/)[1];
  return soft === undefined || soft === 'unlimited' ? Infinity : Number(soft);
}

const logDir = mkdtempSync(join(tmpdir(), 'c2c-bench-push-'));
const dataDir = mkdtempSync(join(tmpdir(), 'c2c-bench-push-data-'));
let database: Awaited<ReturnType<typeof scratchDatabase>> | undefined;
let cleaning: Promise<void> | undefined;

function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await stopAll();
    await database?.drop().catch((error: unknown) => console.error(`could not drop the scratch database: ${(error as Error).message}`));
    rmSync(dataDir, { recursive: true, force: true });
  })();
  return cleaning;
}

const bail = (code: number, why: string) => {
  console.error(`\nbench:push ${why}; stopping every child process and dropping the scratch database … (logs: ${logDir})`);
  void cleanup().finally(() => process.exit(code));
};
process.on('SIGINT', () => bail(130, 'interrupted'));
process.on('SIGTERM', () => bail(143, 'terminated'));
process.on('exit', killAllNow);
setTimeout(() => bail(124, `ran past BENCH_TIMEOUT_S=${TIMEOUT_S}`), TIMEOUT_S * 1000).unref();

async function main() {
  const limit = openFilesLimit();
  const needed = SOCKETS + 1000;
  console.log(`bench:push — ${SOCKETS} sockets, ${RATE} commands/s for ${SECONDS} s (+${WARMUP_S} s warm-up), ${WORKERS} client processes, ${cpus().length} CPUs, Node ${process.version}`);
  console.log(`open files limit (ulimit -n): ${limit}; a server process holds up to ${SOCKETS} sockets`);
  if (limit < needed) throw new Error(`ulimit -n is ${limit}: a server must hold ${SOCKETS} sockets (+ its own files). Raise it (ulimit -n ${needed}) or lower BENCH_SOCKETS.`);
  console.log(`logs of every process: ${logDir}`);
  const quiet = await preflight(redisUrl());


  database = await scratchDatabase(DATABASE_URL);
  const roundTrips = await postgresRoundTrips(database.url);
  console.log(
    `PostgreSQL round trip, unloaded (median): ${roundTrips.select_ms} ms back to back, ${roundTrips.select_after_pause_ms} ms after a pause; INSERT transaction ${roundTrips.insert_commit_ms} ms (synchronous_commit ${roundTrips.synchronous_commit})`,
  );
  const apiPort = await freePort();
  const env: StackEnv = { databaseUrl: database.url, redisUrl: redisUrl(), dataDir, logDir, apiPort };
  const gatewayPorts = [await freePort(), await freePort()];
  const api = await startApi(env, `http://127.0.0.1:${gatewayPorts[0]}`);
  await c2c(env, ['integration', 'policy', DEMO.integrationId, '--concurrency', '100000']);
  const demo = readDemo(env);
  const rest = restClient(apiPort);

  // Agents are needed by (a) and by our gateway's (c) and (d); (b) alone uses the demo agent.
  const seeding = performance.now();
  const members = /[acd]/.test(PARTS) ? await seedMembers(database.url, AGENTS) : [];
  const agents: ReadyAgent[] = await limited(members, 32, (member) => readyAgent(rest, demo, member));
  const history = agents.length > 0 ? await seedHistory(database.url, HISTORY) : 0;
  console.log(`seeded ${agents.length} agents (member, session, ticket, paired engine, ready heartbeat) and ${history} past commands, then analyzed, in ${((performance.now() - seeding) / 1000).toFixed(1)} s`);

  const pool = new Pool(WORKERS);
  const pidsOf = otherPids(database.url, await redisServerPid(env.redisUrl), pool.workers.map((worker) => worker.pid!));
  const results: Record<string, unknown> = {
    ran_at: new Date().toISOString(),
    command: commandLine(),
    node: process.version,
    cpus: cpus().length,
    cpu_model: cpus()[0]?.model,
    open_files_limit: limit,
    scale: { sockets: SOCKETS, agents: AGENTS, rate_per_s: RATE, extra_rates_per_s: EXTRA_RATES, drain_s: DRAIN_S, seconds: SECONDS, warmup_s: WARMUP_S, workers: WORKERS, heartbeat_ms: HEARTBEAT_MS, broadcast_rate_per_s: BCAST_RATE, broadcast_seconds: BCAST_SECONDS, inflight_per_worker: INFLIGHT, parts: PARTS, full: FULL, client: CLIENT, history_per_agent: HISTORY },
    infrastructure: { database: 'PostgreSQL (scratch database on DATABASE_URL)', redis: env.redisUrl, postgres_unloaded: roundTrips },
    machine_busy_before_start: quiet,
  };

  let partA: PartAResult | undefined;
  if (PARTS.includes('a')) {
    const gateways: Array<{ proc: Proc; url: string }> = [];
    for (const [index, port] of gatewayPorts.entries()) {
      gateways.push({ proc: await startGatewayNode(env, `gateway-${index + 1}`, port!), url: `http://127.0.0.1:${port}` });
    }
    partA = await runPartA(pool, agents, demo, demo.site_url, { rate: RATE, extraRates: EXTRA_RATES, drainS: DRAIN_S, seconds: SECONDS, warmupS: WARMUP_S, heartbeatMs: HEARTBEAT_MS, inflight: INFLIGHT, gateways, api, databaseUrl: database.url, pidsOf });
    results.a = partA;
    for (const gateway of gateways) await gateway.proc.stop();
  }

  let comparison: Comparison | undefined;
  if (/[bcd]/.test(PARTS)) {
    comparison = await compare(env, pool, agents, demo, {
      sockets: SOCKETS,
      inflight: INFLIGHT,
      broadcastRate: BCAST_RATE,
      broadcastSeconds: BCAST_SECONDS,
      parts: PARTS,
      api,
      pidsOf,
    });
    results.comparison = comparison;
  }

  const targets = judge(partA, comparison);
  results.targets = targets;
  const file = writeResult(OUT, results);
  printTable(targets);
  console.log(`\nwritten ${file}`);
  // The section is written from the full-scale file and the capacity file, whichever run just ended.
  if (OUT === 'push' || OUT === CAPACITY_OUT || OUT === RECHECK_OUT || process.env.BENCH_DOCS === '1') {
    writeDocsSection(join(ROOT, 'docs', 'performance.md'), docsBody(readResults('push'), readResults(CAPACITY_OUT), readResults(RECHECK_OUT)));
    console.log('updated docs/performance.md (section "Push (npm run bench:push)")');
  } else {
    console.log(`docs/performance.md not updated (it reports loadtest/results/push.json, ${CAPACITY_OUT}.json and ${RECHECK_OUT}.json; BENCH_DOCS=1 forces it)`);
  }
}

/**
 * Refuses to run while another c2c node (a server, another bench) listens on the bus channels of
 * this Redis database (busChannels): their messages would mix with ours. Reports how busy the
 * machine was just before, since everything here shares its two cores.
 */
async function preflight(url: string): Promise<number> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  const channels = busChannels(url);
  try {
    await redis.connect();
    const [, bus] = (await redis.call('PUBSUB', 'NUMSUB', channels.bus)) as [string, number];
    const shards = (await redis.call('PUBSUB', 'SHARDCHANNELS', `${channels.adapterPrefix}#*`)) as string[];
    if (Number(bus) > 0 || shards.length > 0) {
      throw new Error(`another c2c node is on this Redis database (${bus} subscribers of ${channels.bus}, ${shards.length} adapter channels): stop it first`);
    }
  } finally {
    redis.disconnect();
  }
  const from = machineCpu();
  await sleep(2000);
  const to = machineCpu();
  const busy = round((to.busy - from.busy) / Math.max(1, to.total - from.total), 3);
  console.log(`machine busy before start: ${Math.round(busy * 100)} % of both cores${busy > 0.2 ? ' — WARNING: something else is running; figures will suffer' : ''}`);
  return busy;
}

const started = performance.now();
try {
  await main();
  console.log(`\nbench:push done in ${round((performance.now() - started) / 1000, 1)} s`);
  await cleanup();
  if (process.env.BENCH_KEEP_LOGS !== '1') rmSync(logDir, { recursive: true, force: true });
  process.exit(0);
} catch (error) {
  console.error(`\nbench:push failed: ${(error as Error).stack ?? String(error)}`);
  console.error(`logs: ${logDir}`);
  await cleanup();
  process.exit(1);
}
