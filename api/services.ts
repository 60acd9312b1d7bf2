/**
 * The service container: infrastructure (store, bus, clock, counters, config) and the domain
 * services built on it. Routes and the gateway receive this one object, so both call the same
 * domain code.
 */
import type { Realtime } from '../shared/types.js';
import type { Bus } from './bus/index.js';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import { createCalls } from './domain/calls/service.js';
import { createPlatform } from './domain/platform.js';
import { createSessions } from './domain/sessions.js';
import type { RateCounter } from './ratelimit/index.js';
import type { Db } from './store/index.js';

export interface Infra {
  config: Config;
  db: Db;
  bus: Bus;
  clock: Clock;
  counter: RateCounter;
}

export function createServices(infra: Infra) {
  const { config, db, bus, clock } = infra;
  const platform = createPlatform(db, bus, clock);
  const sessions = createSessions({ db, bus, clock, widgetTokenTtlSeconds: config.widgetTokenTtlSeconds });
  const calls = createCalls({ db, bus, clock });
  const realtime: Realtime = { url: config.gatewayUrl, path: '/socket.io', available: false };
  return { ...infra, platform, sessions, calls, realtime };
}

export type Services = ReturnType<typeof createServices>;
