/**
 * CORS for the API (spec section 5, rule 4): a browser gets Access-Control-Allow-Origin only for an
 * origin that some active integration allows (widgets on integrators' pages; OriginPolicy), or for
 * the service's own site and allowed extensions (the call window and the extension, when they are
 * not on the API's origin). Credentials still decide everything: CORS only lets a browser read
 * the answer.
 */
import fastifyCors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import type { Services } from '../services.js';
import { OriginPolicy } from './origin-policy.js';

/** Registers CORS once for the whole API scope. */
export async function useApiCors(app: FastifyInstance, services: Services): Promise<void> {
  const integrations = new OriginPolicy(services);
  const ownPages = new Set([services.config.siteUrl, ...services.config.extensionOrigins]);
  await app.register(fastifyCors, {
    origin: (origin, callback) => {
      if (!origin) return callback(null, false);
      if (ownPages.has(origin)) return callback(null, true);
      integrations.allows(origin).then((ok) => callback(null, ok), (error: Error) => callback(error, false));
    },
    methods: ['GET', 'POST'],
    allowedHeaders: ['Authorization', 'Content-Type', 'If-None-Match'],
    exposedHeaders: ['ETag', 'Retry-After'],
    maxAge: 600,
  });
}
