/**
 * CORS for the API (spec section 5, rule 4): a browser gets Access-Control-Allow-Origin only for an
 * origin that some active integration allows (widgets on integrators' pages; OriginPolicy), or for
 * the service's own site and allowed extensions (the call window and the extension, when they are
 * not on the API's origin), and only on the routes browsers call. Credentials still decide
 * everything: CORS only lets a browser read the answer.
 */
import fastifyCors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import { API_PREFIX } from '../config.js';
import type { Services } from '../services.js';
import { OriginPolicy } from './origin-policy.js';

/**
 * The routes a browser calls: the widget API (the SDK, on integrators' pages) and the engine API
 * (the call window, the extension). The server-key routes get no CORS at all: a server key must
 * never be in a page (spec section 5, rule 2), and a browser that could read their answers would
 * invite putting one there.
 */
const WIDGET_ROUTES = `${API_PREFIX}/widget/`;
const ENGINE_ROUTES = `${API_PREFIX}/engine/`;

/** Registers CORS once for the whole API scope. */
export async function useApiCors(app: FastifyInstance, services: Services): Promise<void> {
  const integrations = new OriginPolicy(services);
  const ownPages = new Set([services.config.siteUrl, ...services.config.extensionOrigins]);
  /**
   * The widget API answers only origins an active integration allows (spec section 5, rule 4),
   * the service's own site included: no page of it uses the widget API, and a site that is also an
   * integrator's page is allowed as that integration's. The engine API answers the service's own
   * pages too.
   */
  const originCheck = (ownPagesToo: boolean) => (origin: string | undefined, callback: (error: Error | null, allow: boolean) => void) => {
    if (!origin) return callback(null, false);
    if (ownPagesToo && ownPages.has(origin)) return callback(null, true);
    integrations.allows(origin).then((ok) => callback(null, ok), (error: Error) => callback(error, false));
  };
  const common = {
    methods: ['GET', 'POST'],
    allowedHeaders: ['Authorization', 'Content-Type', 'If-None-Match'],
    exposedHeaders: ['ETag', 'Retry-After'],
    maxAge: 600,
    // An OPTIONS naming no Access-Control-Request-Method (no browser sends one) is answered as a
    // preflight too, rather than with the plugin's bare text 400 outside the error envelope.
    strictPreflight: false,
  };
  const forWidgets = { ...common, origin: originCheck(false) };
  const forEngines = { ...common, origin: originCheck(true) };
  await app.register(fastifyCors, {
    delegator: (request, callback) =>
      callback(null, request.url.startsWith(WIDGET_ROUTES) ? forWidgets : request.url.startsWith(ENGINE_ROUTES) ? forEngines : { origin: false }),
  });
}
