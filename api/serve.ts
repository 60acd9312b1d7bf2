/**
 * Starting and stopping a node: open the store, bus and counters chosen by config, build the
 * services and the app, listen, and (with the demo flag) seed the demo tenant.
 */
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { openBus } from './bus/index.js';
import { registerAdminBridge } from './cli/admin-bridge.js';
import { systemClock, type Clock } from './clock.js';
import type { Config } from './config.js';
import { demoFile, seedDemo } from './demo/seed.js';
import { openRateCounter } from './ratelimit/index.js';
import { createServices, type Services } from './services.js';
import { openStore } from './store/index.js';

export interface RunningNode {
  services: Services;
  app: FastifyInstance;
  /** the API's listening address */
  url: string;
  close(): Promise<void>;
}

export interface StartOptions {
  demo?: boolean;
  logger?: boolean | object;
  clock?: Clock;
  rateLimitScale?: number;
}

/** Opens the infrastructure and builds the services, without listening (CLI and tests). */
export async function openServices(config: Config, clock: Clock = systemClock): Promise<Services> {
  const db = await openStore(config);
  const bus = await openBus(config.redisUrl);
  const counter = await openRateCounter(config.redisUrl, clock);
  const log = (message: string, error?: unknown) => console.error(message, error instanceof Error ? error.message : (error ?? ''));
  return createServices({ config, db, bus, clock, counter, log });
}

export async function closeServices(services: Services): Promise<void> {
  await services.counter.close();
  await services.bus.close();
  await services.db.close();
}

export async function startNode(config: Config, options: StartOptions = {}): Promise<RunningNode> {
  const services = await openServices(config, options.clock);
  const app = await buildApp(services, { logger: options.logger, rateLimitScale: options.rateLimitScale });
  const publishAdminFile = registerAdminBridge(app, services);
  await app.listen({ port: config.port, host: config.host });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = `http://127.0.0.1:${port}`;
  const removeAdminFile = publishAdminFile(url);
  services.reaper.start();

  if (options.demo) {
    const { credentials, fresh } = await seedDemo(services, config);
    const log = app.log;
    if (fresh) {
      log.info(`Demo tenant ready. Credentials (also in ${demoFile(config)}):\n${JSON.stringify({ ...credentials, server_key: '<see demo.json>' }, null, 2)}`);
      process.stdout.write(`\nDemo server key (shown once here; kept in ${demoFile(config)}): ${credentials.server_key}\n\n`);
    } else {
      log.info(`Demo tenant ready; credentials in ${demoFile(config)}`);
    }
  }

  let closing: Promise<void> | undefined;
  return {
    services,
    app,
    url,
    close() {
      closing ??= (async () => {
        removeAdminFile();
        await services.reaper.stop();
        await app.close();
        await closeServices(services);
      })();
      return closing;
    },
  };
}
