/**
 * Starting and stopping a node: open the store, bus and counters chosen by config, build the
 * services and the app, listen, and (with the demo flag) seed the demo tenant.
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { startGateway, type Gateway } from '../gateway/server.js';
import { buildApp } from './app.js';
import { openBus } from './bus/index.js';
import { startAdminBridge, type AdminBridge } from './cli/admin-bridge.js';
import { warnOfAllowAll } from './domain/operator/integrations.js';
import { drainServer } from './http/drain.js';
import { atMost } from './at-most.js';
import { systemClock, type Clock } from './clock.js';
import { API_PREFIX, ConfigError, loopbackGatewayWarning, loopbackWebhookWarning, type Config } from './config.js';
import { demoFile, seedDemo, type DemoCredentials } from './demo/seed.js';
import { loggableError } from './http/errors.js';
import { startCrmDemo } from '../examples/crm-demo/server.js';
import { openRateCounter } from './ratelimit/index.js';
import { reachRedis, requireShardedPubSub } from './redis.js';
import { createServices, type Services } from './services.js';
import { connectStore, type Db } from './store/index.js';
import { migrate } from './store/migrate.js';

export type Role = 'api' | 'gateway' | 'all';

/**
 * How long a stopping API lets requests in flight finish before it cuts their connections: longer
 * than any request takes while the store answers (one cut is told nothing, so this is for requests
 * stuck on a store that does not). A stop on a struggling store takes at most the gateway's wait for
 * its sockets' requests and a catch-up (1 s, side by side: REQUESTS_SETTLE_MS in gateway/server.ts,
 * CATCH_UP_STOP_WAIT_MS), this, the last pushes (1 s, PUSHES_SETTLE_MS), the rate counter's last
 * hits (0.5 s, ratelimit/redis.ts) and the store's close (2 s, CLOSE_WAIT_MS): 10.5 s, under the
 * 12 s a stopping process gives itself (cli/signals.ts).
 */
export const DRAIN_MS = 6_000;
/** How long a stopping node waits for its last pushes (within the process's 12 s to exit). */
export const PUSHES_SETTLE_MS = 1_000;


/** Stops taking requests, lets those in flight finish for up to `ms`, then cuts the rest. */
const drain = (app: FastifyInstance, ms: number) => drainServer(app.server, ms, () => app.close());

export interface RunningNode {
  role: Role;
  services: Services;
  /** the API (roles api and all) */
  app?: FastifyInstance;
  /** the API's listening address (roles api and all) */
  url?: string;
  /** the real-time gateway (roles gateway and all) */
  gateway?: Gateway;
  close(): Promise<void>;
}

export interface StartOptions {
  role?: Role;
  demo?: boolean;
  logger?: boolean | object;
  clock?: Clock;
}

/**
 * A connection URL as it may be shown: its password replaced, in the user part and in the query
 * too (both drivers take `?password=`, and pg `?sslpassword=` and the like).
 */
function shownUrl(url: string): string {
  const parsed = new URL(url);
  if (parsed.password) parsed.password = '***';
  for (const name of [...parsed.searchParams.keys()]) if (/pass|secret|token|key/i.test(name)) parsed.searchParams.set(name, '***');
  return parsed.toString();
}

/**
 * Runs a start-up step whose failure the operator fixes in the environment (a server out of
 * reach, a port taken): it fails as a ConfigError, one line naming the variable (cli/main.ts
 * prints it without a stack), the driver's own error kept as its cause.
 */
async function startupStep<T>(what: string, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    throw new ConfigError(`${what}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

/**
 * PostgreSQL's refusals of a migration that the operator fixes in the database, not in our code
 * (SQLSTATE): a role without CREATE on the schema (PostgreSQL 15 takes it from ordinary roles on
 * `public`), a read-only standby or database, a full disk, tables held locked by another transaction.
 */
const MIGRATION_REFUSALS: Record<string, string> = {
  '42501': 'its role may not create or change the tables (grant it CREATE on the schema, or connect as the tables\' owner)',
  '25006': 'it takes no writes (a read-only standby or database: point DATABASE_URL at the primary)',
  '53100': 'its disk is full',
  '55P03': 'another transaction holds the tables locked',
};

/** Migrates; a refusal the operator fixes in the database fails as a ConfigError, one line saying so. Anything else is a defect, with its stack. */
async function migrateOrSayWhy(db: Db, config: Config): Promise<void> {
  try {
    await migrate(db);
  } catch (error) {
    // the store's own errors (a read-only database is StoreUnavailable) carry PostgreSQL's as their cause
    const codeOf = (value: unknown) => String((value as { code?: unknown } | null)?.code);
    const why = MIGRATION_REFUSALS[codeOf(error)] ?? MIGRATION_REFUSALS[codeOf((error as { cause?: unknown } | null)?.cause)];
    if (!why || !config.databaseUrl) throw error;
    throw new ConfigError(`PostgreSQL at DATABASE_URL (${shownUrl(config.databaseUrl)}) refused the migrations: ${why}. ${(error as Error).message}`, { cause: error });
  }
}

/** Opens the infrastructure and builds the services, without listening (CLI and tests). */
export async function openServices(config: Config, clock: Clock = systemClock): Promise<Services> {
  const opened: Array<{ close(): Promise<void> }> = [];
  try {
    // Reaching the store is the environment's; a migration that fails is a defect, shown with its
    // stack, unless the database refused it for a reason of its own (MIGRATION_REFUSALS).
    const db = await startupStep(
      config.databaseUrl ? `PostgreSQL at DATABASE_URL (${shownUrl(config.databaseUrl)})` : `the embedded store in C2C_DATA_DIR (${config.dataDir})`,
      () => connectStore(config),
    );
    opened.push(db);
    await migrateOrSayWhy(db, config);
    if (config.redisUrl) {
      const redisUrl = config.redisUrl;
      await startupStep(`Redis at REDIS_URL (${shownUrl(redisUrl)}) cannot be reached`, () => reachRedis(redisUrl));
      await startupStep(`Redis at REDIS_URL (${shownUrl(redisUrl)})`, () => requireShardedPubSub(redisUrl));
    }
    const bus = await startupStep('Redis at REDIS_URL', () => openBus(config.redisUrl, clock));
    opened.push(bus);
    const counter = await startupStep('Redis at REDIS_URL', () => openRateCounter(config.redisUrl, clock));
    // A store error's message may quote the value it refused: logged as the request handler logs it (http/errors.ts).
    const log = (message: string, error?: unknown) => console.error(message, error instanceof Error ? loggableError(error).message : (error ?? ''));
    return createServices({ config, db, bus, clock, counter, log });
  } catch (error) {
    // an embedder (a test, the CLI) that goes on is not left with open connections
    for (const part of opened.reverse()) await part.close().catch(() => {});
    throw error;
  }
}

export async function closeServices(services: Services): Promise<void> {
  await services.counter.close();
  await services.bus.close();
  await services.db.close();
}

export async function startNode(config: Config, options: StartOptions = {}): Promise<RunningNode> {
  const role = options.role ?? 'all';
  // The embedded store and the in-process bus serve one process: an API node and a gateway node on
  // them would each have their own, and nothing one did would reach the other's clients.
  if (role !== 'all' && (!config.databaseUrl || !config.redisUrl)) {
    throw new ConfigError(`--role ${role} runs one part of a deployment of several nodes, which share PostgreSQL and Redis: set DATABASE_URL and REDIS_URL (or run --role all, which needs neither).`);
  }
  if (role === 'all' && config.port !== 0 && config.port === config.gatewayPort) {
    throw new ConfigError(`PORT and GATEWAY_PORT are both ${config.port}: the API and the gateway each need a port of their own.`);
  }
  if (config.trustProxy === true) {
    console.error('TRUST_PROXY=true believes every X-Forwarded-For entry: a client can pick the address its rate limits count by unless the proxy in front overwrites the header. Set TRUST_PROXY to the proxies\' addresses or CIDR ranges instead.');
  }
  const services = await openServices(config, options.clock);
  // Clients learn push is available where a gateway serves this deployment.
  services.realtime.available = role !== 'api' || config.gatewayConfigured;
  const stopPusher = services.pusher.start();
  const cleanups: Array<() => Promise<void> | void> = [];
  const node: RunningNode = { role, services, close: () => closing ?? (closing = closeAll()) };
  let closing: Promise<void> | undefined;
  const closeAll = async () => {
    // The gateway first: its clients are told at once to reconnect elsewhere, and it stops taking
    // sockets, however long the API then takes to finish its requests.
    await node.gateway?.close();
    for (const cleanup of cleanups.reverse()) await cleanup();
    // The pushes of the last changes (requests, the reaper's last tick) go out before the bus closes:
    // a widget on another node would otherwise keep the state before them until its agent's next change.
    await services.pusher.settled(PUSHES_SETTLE_MS);
    stopPusher();
    await closeServices(services);
  };

  try {
    if (role !== 'api') {
      const gateway = await startGateway(services, { port: config.gatewayPort, host: config.host });
      node.gateway = gateway;
    }
    if (role !== 'gateway') {
      const app = await buildApp(services, { logger: options.logger });
      await startupStep(`the API cannot listen on ${config.host}:${config.port} (HOST, PORT)`, () => app.listen({ port: config.port, host: config.host }));
      node.app = app;
      node.url = localUrl(app.server.address() as AddressInfo);
      let bridge: AdminBridge | undefined;
      let crm: { close(): Promise<void> } | undefined;
      // registered at once, so that a start failing after this point still closes the listener
      cleanups.push(async () => {
        // the reaper's tick under way, the requests and operator commands in flight finish before
        // the store closes; the demo CRM's requests too, which wait on the API's
        await Promise.all([atMost(services.reaper.stop(), DRAIN_MS), drain(app, DRAIN_MS), bridge?.close(DRAIN_MS), crm && atMost(crm.close(), DRAIN_MS)]);
      });
      bridge = await startupStep('the admin bridge cannot listen on loopback (127.0.0.1 or ::1)', () => startAdminBridge(services));
      await warnOfAllowAll(services.db, (message) => app.log.warn(message));
      const unreachableGateway = role === 'all' ? loopbackGatewayWarning(config) : null;
      if (unreachableGateway) app.log.warn(unreachableGateway);
      const unreachableWebhooks = loopbackWebhookWarning(config);
      if (unreachableWebhooks) app.log.warn(unreachableWebhooks);
      services.reaper.start();
      if (options.demo) {
        const credentials = await announceDemo(services, config, app);
        // DEMO_PORT=0 seeds the tenant without running the demo CRM (benchmarks, some tests).
        if (config.demoPort === 0) return node;
        crm = await startupStep(`the demo CRM cannot listen on 127.0.0.1:${config.demoPort} (DEMO_PORT; 0 runs no demo CRM)`, () => startCrmDemo({
          port: config.demoPort,
          baseUrl: `${node.url}/api/v1/click2call`,
          siteUrl: config.siteUrl,
          browserBaseUrl: `${config.publicBaseUrl}${API_PREFIX}`,
          gatewayUrl: config.gatewayUrl,
          integrationId: credentials.integration_id,
          serverKey: credentials.server_key,
          users: { agent: credentials.agent, disabled: credentials.agent_disabled, unassigned: credentials.agent_unassigned },
          publicOrigin: credentials.allowed_origin,
        }));
        app.log.info(`Demo CRM on http://127.0.0.1:${config.demoPort}/`);
      }
    }
  } catch (error) {
    await node.close();
    throw error;
  }
  return node;
}

/**
 * The URL this machine reaches a listening address at (the API's, for the demo CRM): an
 * address that is every interface's is reached on loopback, any other as it is.
 */
export function localUrl(address: AddressInfo): string {
  // `::` listens on IPv4 too (dual stack, Node's default), so loopback IPv4 reaches it wherever IPv6 loopback may be off
  const host = address.address === '0.0.0.0' || address.address === '::' ? '127.0.0.1' : address.address;
  return `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
}

async function announceDemo(services: Services, config: Config, app: FastifyInstance): Promise<DemoCredentials> {
  const { credentials, fresh } = await seedDemo(services, config);
  if (fresh) {
    app.log.info(`Demo tenant ready. Credentials (also in ${demoFile(config)}):\n${JSON.stringify({ ...credentials, server_key: '<see demo.json>' }, null, 2)}`);
    process.stdout.write(`\nDemo server key (shown once here; kept in ${demoFile(config)}): ${credentials.server_key}\n\n`);
  } else {
    app.log.info(`Demo tenant ready; credentials in ${demoFile(config)}`);
  }
  return credentials;
}
