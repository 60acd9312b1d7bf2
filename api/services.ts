/**
 * The service container: infrastructure (store, bus, clock, counters, providers, config) and the
 * domain services built on it. Routes and the gateway receive this one object, so both call the
 * same domain code.
 */
import { SOCKET_PATH } from '../shared/events.js';
import type { Realtime } from '../shared/types.js';
import type { Bus } from './bus/index.js';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import { createCalls } from './domain/calls/service.js';
import { createCommands } from './domain/commands/service.js';
import { createDirectory } from './domain/directory.js';
import { createEngines } from './domain/engines/service.js';
import { createPlatform } from './domain/platform.js';
import { createReaper } from './domain/reaper.js';
import { createSessions } from './domain/sessions.js';
import { createWidgetStates } from './domain/widget-states.js';
import { createPusher } from './domain/push.js';
import { createMetrics } from './metrics.js';
import { createProviders, type Providers } from './providers/index.js';
import type { RateCounter } from './ratelimit/index.js';
import type { Db } from './store/index.js';

export interface Infra {
  config: Config;
  db: Db;
  bus: Bus;
  clock: Clock;
  counter: RateCounter;
  /** defaults to the configured provider plus the simulator */
  providers?: Providers;
  /** where background work (the reaper) reports failures */
  log?: (message: string, error?: unknown) => void;
}

export function createServices(infra: Infra) {
  const { config, db, bus, clock } = infra;
  const providers = infra.providers ?? createProviders(config, clock);
  providers.simulator.join(bus);
  const platform = createPlatform(db, bus, clock);
  const directory = createDirectory(db, bus, clock);
  const sessions = createSessions({ db, bus, clock, directory, widgetTokenTtlSeconds: config.widgetTokenTtlSeconds });
  const calls = createCalls({ db, bus, clock, config, providers });
  // available turns true where a gateway serves this deployment (serve.ts decides by role and config).
  const realtime: Realtime = { url: config.gatewayUrl, path: SOCKET_PATH, available: false };
  const widgetStates = createWidgetStates({ db, bus, clock, realtime });
  const commands = createCommands({ db, bus, clock, providers, widgetStates });
  const engines = createEngines({ db, bus, clock, config, providers, commands, directory, log: infra.log });
  const commandRetentionMs = config.commandRetentionDays === undefined ? undefined : config.commandRetentionDays * 24 * 3600 * 1000;
  const callRetentionMs = config.callRetentionDays === undefined ? undefined : config.callRetentionDays * 24 * 3600 * 1000;
  const reaper = createReaper({ db, bus, clock, providers, commandRetentionMs, callRetentionMs, log: infra.log });
  const metrics = createMetrics(bus, db, providers, reaper);
  commands.onRedelivery = () => metrics.redeliveries.inc();
  engines.onAcks = (via, count) => metrics.acks.inc({ via }, count);
  const pusher = createPusher({ db, bus, clock, realtime, widgetStates, commands, directory, observe: metrics.observePush, observeDebt: (event) => metrics.missedChanges.inc({ event }), log: infra.log });
  return { ...infra, providers, platform, directory, sessions, calls, commands, engines, reaper, realtime, widgetStates, metrics, pusher };
}

export type Services = ReturnType<typeof createServices>;
