/**
 * A whole service for one suite: the real app and domain on a real store driver, the in-process
 * bus, in-memory rate counters and a ManualClock, driven through fastify's inject (real routing,
 * hooks, validation and serialization, no sockets).
 */
import type { FastifyInstance, InjectOptions } from 'fastify';
import { buildApp } from '../../api/app.js';
import type { Bus } from '../../api/bus/index.js';
import { createMemoryBus } from '../../api/bus/memory.js';
import { ManualClock } from '../../api/clock.js';
import { loadConfig, API_PREFIX, type Config } from '../../api/config.js';
import { createMemoryCounter } from '../../api/ratelimit/memory.js';
import { createRedisCounter } from '../../api/ratelimit/redis.js';
import { counterRedis } from '../../api/ratelimit/index.js';
import { createServices, type Services } from '../../api/services.js';
import type { StoreDriver } from './env.js';
import { openTestDatabase, type TestDatabase } from './databases.js';

export interface Harness {
  driver: StoreDriver;
  clock: ManualClock;
  services: Services;
  app: FastifyInstance;
  config: Config;
  close(): Promise<void>;
}

export interface HarnessOptions {
  /** share rate counters through Redis at this URL instead of memory */
  redisCounterUrl?: string;
  /** reuse an existing database (a second node); the caller drops it */
  database?: TestDatabase;
  clock?: ManualClock;
  /** this node's bus (a Redis bus, to stand beside other nodes); the caller closes it */
  bus?: Bus;
}

export async function createHarness(driver: StoreDriver, configOverrides: Partial<Config> = {}, options: HarnessOptions = {}): Promise<Harness> {
  const database: TestDatabase = options.database ?? (await openTestDatabase(driver));
  const clock = options.clock ?? new ManualClock();
  const counter = options.redisCounterUrl ? createRedisCounter(await counterRedis(options.redisCounterUrl), clock) : createMemoryCounter(clock);
  const config = loadConfig({ LOG_LEVEL: 'silent' }, { publicBaseUrl: 'http://c2c.test', apiBaseUrl: `http://c2c.test${API_PREFIX}`, siteUrl: 'http://c2c.test', ...configOverrides });
  const services = createServices({ config, db: database.db, bus: options.bus ?? createMemoryBus(), clock, counter });
  const app = await buildApp(services, { logger: false });
  await app.ready();
  return {
    driver,
    clock,
    services,
    app,
    config,
    async close() {
      await app.close();
      await counter.close();
      if (!options.database) await database.drop();
    },
  };
}

/**
 * Two nodes on one store, on one clock, each with its own bus: in-process by default, so what one
 * announces reaches the other only when the test delivers it (as Redis would, a moment later); or
 * the buses given (the caller closes them). Both nodes are closed and the store dropped after `run`.
 */
export async function withTwoNodes<T>(driver: StoreDriver, run: (x: Harness, y: Harness) => Promise<T>, buses: { x?: Bus; y?: Bus } = {}): Promise<T> {
  const database = await openTestDatabase(driver);
  const x = await createHarness(driver, {}, { database, bus: buses.x });
  const y = await createHarness(driver, {}, { database, bus: buses.y, clock: x.clock });
  try {
    return await run(x, y);
  } finally {
    await y.close();
    await x.close();
    await database.drop();
  }
}

export interface CallOptions {
  /** bearer credential */
  auth?: string;
  origin?: string;
  headers?: Record<string, string>;
  /** a raw payload (text, or bytes) instead of JSON */
  raw?: string | Buffer;
  ip?: string;
}

export interface Reply<T = any> {
  status: number;
  body: T;
  headers: Record<string, string | string[] | number | undefined>;
}

/** Requests against the app under /api/v1/click2call (or an absolute path starting with //). */
export function client(app: FastifyInstance) {
  const send = async <T = any>(method: 'GET' | 'POST' | 'OPTIONS', path: string, body?: unknown, options: CallOptions = {}): Promise<Reply<T>> => {
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    if (options.auth) headers.authorization = `Bearer ${options.auth}`;
    if (options.origin) headers.origin = options.origin;
    const request: InjectOptions = {
      method,
      url: path.startsWith('//') ? path.slice(1) : `${API_PREFIX}${path}`,
      headers,
      remoteAddress: options.ip ?? '203.0.113.7',
    };
    if (options.raw !== undefined) request.payload = options.raw;
    else if (body !== undefined) request.payload = body as InjectOptions['payload'];
    const response = await app.inject(request);
    let parsed: unknown = response.body;
    try {
      parsed = response.body === '' ? undefined : JSON.parse(response.body);
    } catch {
      // not JSON: keep the text
    }
    return { status: response.statusCode, body: parsed as T, headers: response.headers };
  };
  return {
    get: <T = any>(path: string, options?: CallOptions) => send<T>('GET', path, undefined, options),
    post: <T = any>(path: string, body?: unknown, options?: CallOptions) => send<T>('POST', path, body, options),
    options: (path: string, options?: CallOptions) => send('OPTIONS', path, undefined, options),
  };
}

export type Client = ReturnType<typeof client>;
