/**
 * Our service as npm run bench:push runs it: `c2c serve --role api|gateway` processes on a scratch
 * PostgreSQL database and Redis, started with the probe preloaded; and the tenant it needs: agents
 * created with the project's operator function (createMember), then, over the REST API, a widget
 * session, a launch ticket, a paired (non-simulated) engine and one ready heartbeat per agent.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createMember } from '../../api/domain/operator/accounts.js';
import { DEMO } from '../../api/demo/seed.js';
import { createMemoryBus } from '../../api/bus/memory.js';
import { systemClock } from '../../api/clock.js';
import { openStore } from '../../api/store/index.js';
import { ROOT, startProc, type Proc } from './procs.js';

const run = promisify(execFile);
export const API_PREFIX = '/api/v1/click2call';

export interface StackEnv {
  databaseUrl: string;
  redisUrl: string;
  dataDir: string;
  logDir: string;
  apiPort: number;
}

/** A free TCP port on 127.0.0.1 (asked of the kernel, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export function serviceEnv(env: StackEnv, gatewayPort: number): NodeJS.ProcessEnv {
  return {
    PORT: String(env.apiPort),
    GATEWAY_PORT: String(gatewayPort),
    HOST: '127.0.0.1',
    C2C_DATA_DIR: env.dataDir,
    DATABASE_URL: env.databaseUrl,
    REDIS_URL: env.redisUrl,
    PUBLIC_BASE_URL: `http://127.0.0.1:${env.apiPort}`,
    C2C_RATE_LIMIT_SCALE: '10000',
    // part (b) holds its N broadcast sockets on one widget token
    C2C_SOCKETS_PER_CREDENTIAL: '1000000',
    // the whole bench must fit in one widget token's life; the lifetime does not change any cost
    WIDGET_TOKEN_TTL_SECONDS: '14400',
    LOG_LEVEL: 'warn',
    C2C_DEMO: '',
  };
}

/** GET url until it answers 200 (or the deadline passes); returns the JSON body. */
export async function waitHealthy(url: string, proc: Proc, timeoutMs = 60_000): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void proc.exited.then(() => (exited = true));
  for (;;) {
    if (exited) throw new Error(`${proc.name} exited while starting; log ${proc.log}`);
    try {
      const res = await fetch(url);
      if (res.ok) return (await res.json()) as Record<string, unknown>;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${proc.name} not healthy at ${url} within ${timeoutMs} ms; log ${proc.log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startApi(env: StackEnv, gatewayUrl: string): Promise<Proc> {
  const proc = startProc({
    name: 'api',
    args: ['bin/c2c.js', 'serve', '--role', 'api', '--demo'],
    env: { ...serviceEnv(env, 0), PUBLIC_GATEWAY_URL: gatewayUrl },
    nodeFlags: ['--expose-gc', ...profileFlags(env)],
    logDir: env.logDir,
  });
  await waitHealthy(`http://127.0.0.1:${env.apiPort}/healthz`, proc);
  const demo = join(env.dataDir, 'demo.json');
  for (let i = 0; !existsSync(demo); i += 1) {
    if (i > 300) throw new Error(`no ${demo} after the API started`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return proc;
}

/** BENCH_PROFILE=1: every node of ours writes a V8 CPU profile into the log directory when it stops. */
const profileFlags = (env: StackEnv) => (process.env.BENCH_PROFILE === '1' ? ['--cpu-prof', `--cpu-prof-dir=${env.logDir}`] : []);

export async function startGatewayNode(env: StackEnv, name: string, port: number): Promise<Proc> {
  const proc = startProc({
    name,
    args: ['bin/c2c.js', 'serve', '--role', 'gateway'],
    env: serviceEnv(env, port),
    nodeFlags: ['--expose-gc', ...profileFlags(env)],
    logDir: env.logDir,
  });
  const health = await waitHealthy(`http://127.0.0.1:${port}/healthz`, proc);
  if (health.native !== true) throw new Error(`${name}: uWebSockets.js is not native (${JSON.stringify(health)})`);
  if (health.bus !== 'up') throw new Error(`${name}: bus not up (${JSON.stringify(health)})`);
  return proc;
}

/** Runs an operator command (`node bin/c2c.js …`): inside the running API through its bridge. */
export async function c2c(env: StackEnv, args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, ['bin/c2c.js', ...args], { cwd: ROOT, env: { ...process.env, ...serviceEnv(env, 0) } });
  return stdout;
}

export interface Demo {
  server_key: string;
  integration_id: string;
  allowed_origin: string;
  site_url: string;
}

export function readDemo(env: StackEnv): Demo {
  return JSON.parse(readFileSync(join(env.dataDir, 'demo.json'), 'utf8')) as Demo;
}

/** Runs jobs with at most `limit` at once, in order of the list. */
export async function limited<T, R>(items: T[], limit: number, job: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const index = next++;
      out[index] = await job(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return out;
}

/** Creates `count` members of the demo account, in its Sales department (covered by the demo integration). */
export async function seedMembers(databaseUrl: string, count: number, prefix = 'bench'): Promise<Array<{ id: string; email: string }>> {
  const db = await openStore({ databaseUrl });
  const deps = { db, bus: createMemoryBus(), clock: systemClock };
  try {
    const indexes = Array.from({ length: count }, (_, i) => i);
    return await limited(indexes, 8, async (i) => {
      const member = await createMember(deps, { accountId: DEMO.accountId, email: `${prefix}-${i}@demo.example`, name: `Bench ${i}`, departmentId: DEMO.sales });
      return { id: member.id, email: member.email };
    });
  } finally {
    await db.close();
  }
}

/**
 * Gives every seeded agent `perAgent` commands of the past (done, acked once) and then analyzes
 * the database, as a live database's history and autovacuum would have it. A scratch database
 * is otherwise empty when the servers prepare their statements, and PostgreSQL keeps the plans it
 * made then until the next ANALYZE: an ack UPDATE planned against an empty widget_commands went on
 * scanning the whole table as the run filled it.
 */
export async function seedHistory(databaseUrl: string, perAgent: number): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const now = Date.now();
    const { rowCount } = await client.query(
      `INSERT INTO widget_commands (integration_id, member_id, request_id, kind, engine_id, status, deliveries, acks, created_at, delivered_at, done_at)
       SELECT e.integration_id, e.member_id, 'history-' || e.id || '-' || g, 'focus', e.id, 'done', 1, 1, $2::bigint - g * 60000, $2::bigint - g * 60000, $2::bigint - g * 60000
         FROM engines e CROSS JOIN generate_series(1, $1::int) AS g`,
      [perAgent, now],
    );
    await client.query('ANALYZE');
    return rowCount ?? 0;
  } finally {
    await client.end();
  }
}

export interface RestClient {
  post<T = Record<string, unknown>>(path: string, body: unknown, options?: { auth?: string; origin?: string; expect?: number }): Promise<T>;
}

export function restClient(apiPort: number): RestClient {
  const base = `http://127.0.0.1:${apiPort}${API_PREFIX}`;
  return {
    async post<T>(path: string, body: unknown, options: { auth?: string; origin?: string; expect?: number } = {}) {
      const headers: Record<string, string> = {};
      if (body !== undefined) headers['content-type'] = 'application/json';
      if (options.auth) headers.authorization = `Bearer ${options.auth}`;
      if (options.origin) headers.origin = options.origin;
      const res = await fetch(`${base}${path}`, { method: 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await res.text();
      if (res.status !== (options.expect ?? 200)) throw new Error(`POST ${path} → ${res.status} ${text.slice(0, 300)}`);
      return JSON.parse(text) as T;
    },
  };
}

export interface ReadyAgent {
  memberId: string;
  email: string;
  widgetToken: string;
  engineToken: string;
  engineId: string;
}

/** POST /sessions → POST /widget/launch-ticket → POST /engine/pair → POST /engine/heartbeat (ready). */
export async function readyAgent(rest: RestClient, demo: Demo, member: { id: string; email: string }): Promise<ReadyAgent> {
  const session = await rest.post<{ widget_token: string }>(
    '/sessions',
    { integration_id: demo.integration_id, agent: { type: 'email', value: member.email }, origin: demo.allowed_origin },
    { auth: demo.server_key, expect: 201 },
  );
  const ticket = await rest.post<{ ticket: string }>('/widget/launch-ticket', undefined, { auth: session.widget_token, origin: demo.allowed_origin });
  const paired = await rest.post<{ engine_token: string; engine: { id: string } }>('/engine/pair', { ticket: ticket.ticket, simulated: false }, { expect: 201 });
  await rest.post('/engine/heartbeat', { state: 'ready', mic_ready: true, call_id: null }, { auth: paired.engine_token });
  return { memberId: member.id, email: member.email, widgetToken: session.widget_token, engineToken: paired.engine_token, engineId: paired.engine.id };
}

/**
 * The processes besides our servers whose CPU counts: the Redis server of REDIS_URL, the PostgreSQL
 * backends of the scratch database (plus the server's own background writers), the client processes.
 */
export function otherPids(databaseUrl: string, redisPid: number, clients: number[]): () => Promise<Record<string, number[]>> {
  return async () => {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query(
        `SELECT pid FROM pg_stat_activity WHERE (datname = current_database() AND pid <> pg_backend_pid()) OR backend_type <> 'client backend'`,
      );
      return { redis: [redisPid], postgres: (rows as Array<{ pid: number }>).map((row) => row.pid), clients };
    } finally {
      await client.end();
    }
  };
}

/** The pid of the Redis server behind a URL (INFO server). */
export async function redisServerPid(url: string): Promise<number> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    const info = await redis.info('server');
    return Number(/process_id:(\d+)/.exec(info)?.[1] ?? 0);
  } finally {
    redis.disconnect();
  }
}

/**
 * What one PostgreSQL round trip costs on this machine, unloaded: a parameterised SELECT back to
 * back, the same after a 20 ms pause each (both processes asleep in between, as on a lightly
 * loaded path), and a one-row INSERT transaction (BEGIN, INSERT, COMMIT with its WAL flush).
 */
export async function postgresRoundTrips(
  databaseUrl: string,
  count = 200,
): Promise<{ select_ms: number; select_after_pause_ms: number; insert_commit_ms: number; synchronous_commit: string }> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const median = async (n: number, pauseMs: number, work: (i: number) => Promise<unknown>) => {
    const times: number[] = [];
    for (let i = 0; i < n; i += 1) {
      if (pauseMs) await new Promise((r) => setTimeout(r, pauseMs));
      const start = performance.now();
      await work(i);
      times.push(performance.now() - start);
    }
    times.sort((x, y) => x - y);
    return Math.round(times[Math.floor(n / 2)]! * 1000) / 1000;
  };
  try {
    await client.query('CREATE TABLE bench_round_trip (id serial PRIMARY KEY, v int)');
    await median(count, 0, (i) => client.query('SELECT $1::int', [i]));
    const select_ms = await median(count, 0, (i) => client.query('SELECT $1::int', [i]));
    const select_after_pause_ms = await median(50, 20, (i) => client.query('SELECT $1::int', [i]));
    const insert_commit_ms = await median(count, 0, async (i) => {
      await client.query('BEGIN');
      await client.query('INSERT INTO bench_round_trip (v) VALUES ($1)', [i]);
      await client.query('COMMIT');
    });
    const { rows } = await client.query('SHOW synchronous_commit');
    await client.query('DROP TABLE bench_round_trip');
    return { select_ms, select_after_pause_ms, insert_commit_ms, synchronous_commit: String((rows[0] as { synchronous_commit: string }).synchronous_commit) };
  } finally {
    await client.end();
  }
}
