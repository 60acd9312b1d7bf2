/**
 * The fastify application: error envelope, OpenAPI, rate limits and the route groups of spec
 * section 4 under /api/v1/click2call. Built from a service container, so tests build it on any
 * store, bus and clock.
 */
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { API_PREFIX } from './config.js';
import underPressure from '@fastify/under-pressure';
import { C2CError } from '../shared/errors.js';
import { LIMITS } from '../shared/limits.js';
import { trustOf } from './http/client-address.js';
import { useApiCors } from './http/cors.js';
import { noStoreByDefault } from './http/no-store.js';
import { clientError, frameworkError, registerErrorHandling, sendError } from './http/errors.js';
import { refuseWhileClosing } from './http/closing.js';
import { parseJsonBodies, refuseRepeatedHeaders, refuseUnstorableInput } from './http/inputs.js';
import { registerOpenApi, registerOpenApiRoute } from './http/openapi.js';
import { registerRateLimits } from './http/rate-limits.js';
import { serverKeyRoutes } from './routes/server/index.js';
import { widgetRoutes } from './routes/widget/index.js';
import { engineGroup } from './routes/engine/index.js';
import { incomingRoutes } from './routes/provider/incoming.js';
import { webhookRoutes } from './routes/provider/webhooks.js';
import { assetRoutes } from './routes/pages/assets.js';
import { windowRoutes } from './routes/pages/window.js';
import type { Services } from './services.js';
import { checkStoreWritable } from './store/db.js';

export interface AppOptions {
  /** pino options, or false for silence (tests) */
  logger?: boolean | object;
}

/**
 * Secrets never reach a log line (DESIGN convention 7). Nor does a failed statement's data: the
 * error handler logs only an allow-list of an error's fields (http/errors.ts, loggableError); the
 * `err.*` paths are the fallback should anything log a store error whole.
 */
export const LOG_REDACT = [
  'req.headers.authorization',
  'req.headers.cookie',
  '*.widget_token',
  '*.server_key',
  '*.engine_token',
  '*.ticket',
  '*.token',
  'err.query',
  'err.params',
  'err.queryOptions',
  'err.detail',
  'err.where',
  'err.hint',
  'err.internalQuery',
];

/** The longest a client may take to send a whole request (its largest body is 64 KB). */
export const REQUEST_TIMEOUT_MS = 30_000;
/** How often the HTTP server looks for requests past REQUEST_TIMEOUT_MS. */
const REQUEST_CHECK_INTERVAL_MS = 2_000;

export async function buildApp(services: Services, options: AppOptions = {}): Promise<FastifyInstance> {
  const logger =
    options.logger === false ? false : { level: services.config.logLevel, redact: LOG_REDACT, ...(typeof options.logger === 'object' ? options.logger : {}) };
  const app = Fastify({
    logger,
    // the gateway's sockets take their client address with the same function (http/client-address.ts)
    trustProxy: trustOf(services.config.trustProxy),
    bodyLimit: LIMITS.requestMaxBytes,
    // A client that stops sending mid-request (a Content-Length it never fills) is answered 408 and
    // let go, instead of holding a connection for ever (fastify's default is no limit). This counts
    // receiving the request only, never the time a route takes to answer.
    requestTimeout: REQUEST_TIMEOUT_MS,
    // Node checks the bound every connectionsCheckingInterval (30 s by default: a 408 came up to a
    // minute late).
    http: { connectionsCheckingInterval: REQUEST_CHECK_INTERVAL_MS },
    clientErrorHandler: clientError,
    frameworkErrors: frameworkError,
    // Stopping (serve.ts): idle kept-alive connections close at once, requests in flight finish
    // (new ones on their connections get 503, in the envelope: refuseWhileClosing); serve.ts cuts
    // what is still running after a bound.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    // Polls and heartbeats arrive by the thousand; request lines are logged only when debugging.
    logController: new LogController({
      disableRequestLogging: services.config.logLevel !== 'debug' && services.config.logLevel !== 'trace',
    }),
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandling(app);
  refuseWhileClosing(app);
  parseJsonBodies(app);
  refuseUnstorableInput(app);
  refuseRepeatedHeaders(app);
  // Optionally shed load with a retryable 503 rather than queue requests behind a stalled event loop.
  if (services.config.maxEventLoopDelayMs > 0) {
    await app.register(underPressure, {
      maxEventLoopDelay: services.config.maxEventLoopDelayMs,
      pressureHandler: (_request, reply) => void sendError(reply, new C2CError('service_unavailable', 'The service is overloaded; retry shortly.', { retryAfter: 1 })),
    });
  }
  await registerOpenApi(app, services.config);
  await registerRateLimits(app, services.counter, services.config.rateLimitScale);

  app.get('/healthz', { schema: { hide: true } }, async () => {
    await checkStoreWritable(services.db);
    return { ok: true, store: services.db.driver, bus: services.bus.state() };
  });
  // Scraped most of all when the node is overloaded: never shed (a pressure handler that lets it through).
  app.get('/metrics', { schema: { hide: true }, config: { pressureHandler: () => undefined } }, async (_request, reply) =>
    reply.type(services.metrics.registry.contentType).send(await services.metrics.registry.metrics()),
  );
  registerOpenApiRoute(app);

  await app.register(
    async (api) => {
      await useApiCors(api, services);
      noStoreByDefault(api);
      await api.register(serverKeyRoutes(services));
      await api.register(widgetRoutes(services));
      await api.register(engineGroup(services));
    },
    { prefix: API_PREFIX },
  );
  await app.register(webhookRoutes(services));
  await app.register(incomingRoutes(services));
  await app.register(assetRoutes);
  await app.register(windowRoutes(services));
  attachSimulator(app, services);
  return app;
}

/** The simulator delivers its webhooks to this app in-process, signed exactly as over HTTP. */
function attachSimulator(app: FastifyInstance, services: Services): void {
  services.providers.simulator.attach(async (path, params, signature) => {
    const response = await app.inject({
      method: 'POST',
      url: path,
      payload: new URLSearchParams(params).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': signature },
    });
    return { status: response.statusCode, body: response.body };
  });
}
