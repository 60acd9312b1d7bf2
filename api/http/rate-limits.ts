/**
 * The rate limits of spec section 8, on @fastify/rate-limit: its createRateLimit() evaluates one
 * limit without replying, so a route can apply two (per IP, then per integration) and refuse with
 * the catalogue's rate_limited and Retry-After. Counting is ours (api/ratelimit), so the window
 * follows the injectable clock and, with Redis, is shared by every node.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fastifyRateLimit from '@fastify/rate-limit';
import { LIMITS } from '../../shared/limits.js';
import type { RateCounter } from '../ratelimit/index.js';
import { rateLimited, scaledLimit } from '../ratelimit/counter.js';
import { RATE_KEYS } from '../ratelimit/keys.js';

type Limiter = (request: FastifyRequest) => Promise<void>;

export interface RateLimits {
  serverKeyPerIp: Limiter;
  serverKeyPerIntegration: (request: FastifyRequest, integrationId: string) => Promise<void>;
  widgetPerIp: Limiter;
  enginePerEngine: (request: FastifyRequest, engineId: string) => Promise<void>;
}

declare module 'fastify' {
  interface FastifyInstance {
    limits: RateLimits;
  }
}

/** Adapts a RateCounter to the store interface @fastify/rate-limit instantiates. */
function storeFor(counter: RateCounter) {
  return class CounterStore {
    incr(key: string, callback: (error: Error | null, result?: { current: number; ttl: number }) => void, timeWindow: number, max: number) {
      counter.hit(key, timeWindow, max).then(
        (hit) => callback(null, { current: hit.count, ttl: hit.resetMs }),
        (error: Error) => callback(error),
      );
    }
    child() {
      return this;
    }
  };
}

/**
 * The client's address, as the per-address limits count it. Node knows none for a connection that
 * closed before anything asked for it (fastify's request.ip is then undefined: the client left
 * while the request waited on the store, say). Such requests, whose answers reach no one, count
 * under one key of their own, rather than failing as a 500 of ours.
 */
const addressOf = (request: FastifyRequest): string => request.ip ?? 'gone';

/** scale multiplies every limit (benchmarks drive thousands of agents from one address). */
export async function registerRateLimits(app: FastifyInstance, counter: RateCounter, scale = 1): Promise<void> {
  await app.register(fastifyRateLimit, {
    global: false,
    store: storeFor(counter) as never,
    // Losing Redis must not take the API down with it: count nothing rather than refuse everyone.
    skipOnError: true,
  });

  const limiter = (max: number, key: (request: FastifyRequest) => string) => {
    const check = app.createRateLimit({
      max: scaledLimit(max, scale),
      timeWindow: LIMITS.rateWindowMs,
      keyGenerator: key,
    });
    return async (request: FastifyRequest) => {
      const result = await check(request);
      if (!result.isAllowed && result.isExceeded) {
        throw rateLimited(result.ttl);
      }
    };
  };

  const subjectKey = Symbol('rateLimitSubject');
  type WithSubject = FastifyRequest & { [subjectKey]?: string };
  const bySubject = (max: number, key: (subject: string) => string) => {
    const check = limiter(max, (request) => key((request as WithSubject)[subjectKey] ?? ''));
    return (request: FastifyRequest, subject: string) => {
      (request as WithSubject)[subjectKey] = subject;
      return check(request);
    };
  };

  app.decorate('limits', {
    serverKeyPerIp: limiter(LIMITS.serverKeyPerIpPerMinute, (request) => RATE_KEYS.serverKeyPerIp(addressOf(request))),
    serverKeyPerIntegration: bySubject(LIMITS.serverKeyPerIntegrationPerMinute, RATE_KEYS.serverKeyPerIntegration),
    widgetPerIp: limiter(LIMITS.widgetPerIpPerMinute, (request) => RATE_KEYS.widgetPerIp(addressOf(request))),
    enginePerEngine: bySubject(LIMITS.enginePerEnginePerMinute, RATE_KEYS.enginePerEngine),
  } satisfies RateLimits);
}
