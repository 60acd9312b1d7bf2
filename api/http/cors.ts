/**
 * CORS for the API (spec section 5, rule 4): a browser gets Access-Control-Allow-Origin only for an
 * origin that some active integration allows (widgets on integrators' pages), or for the service's
 * own site and allowed extensions (the call window and the extension, when they are not on the
 * API's origin). Integration answers are cached per origin until an integration changes anywhere
 * (bus message), since every widget request asks. Credentials still decide everything: CORS only
 * lets a browser read the answer.
 */
import fastifyCors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import { parseOrigin } from '../../shared/origin.js';
import type { Services } from '../services.js';

const MAX_CACHED_ORIGINS = 10_000;

/**
 * Whether some active integration allows an origin, cached per origin. Requests from an origin not
 * cached yet that arrive together (a node just started, every agent of a call centre polling) share
 * one store read; an answer read while an integration changed is not cached, since it may predate
 * the change.
 */
export function createOriginPolicy(services: Services) {
  const cache = new Map<string, boolean>();
  const reading = new Map<string, Promise<boolean>>();
  let generation = 0;
  services.bus.subscribe((message) => {
    if (message.type === 'integration' || message.type === 'resync') {
      cache.clear();
      reading.clear();
      generation += 1;
    }
  });
  async function read(origin: string): Promise<boolean> {
    const readIn = generation;
    const [row] = await services.db.query(
      `SELECT 1 FROM integrations i JOIN accounts a ON a.id = i.account_id
       WHERE i.status = 'active' AND a.status = 'active' AND (i.allow_all_origins OR $1 = ANY(i.allowed_origins)) LIMIT 1`,
      [origin],
    );
    if (readIn === generation) {
      if (cache.size >= MAX_CACHED_ORIGINS) cache.clear();
      cache.set(origin, Boolean(row));
    }
    return Boolean(row);
  }
  return async function isAllowedByAnyIntegration(origin: string): Promise<boolean> {
    const normalized = parseOrigin(origin);
    if (!normalized) return false;
    const known = cache.get(normalized);
    if (known !== undefined) return known;
    let answer = reading.get(normalized);
    if (!answer) {
      // forgotten once settled, unless a change forgot it first and another read took its place
      const settled = (): void => void (reading.get(normalized) === answer && reading.delete(normalized));
      answer = read(normalized).finally(settled);
      reading.set(normalized, answer);
    }
    return answer;
  };
}

/** Registers CORS once for the whole API scope. */
export async function useApiCors(app: FastifyInstance, services: Services): Promise<void> {
  const allowedByIntegration = createOriginPolicy(services);
  const ownPages = new Set([services.config.siteUrl, ...services.config.extensionOrigins]);
  await app.register(fastifyCors, {
    origin: (origin, callback) => {
      if (!origin) return callback(null, false);
      if (ownPages.has(origin)) return callback(null, true);
      allowedByIntegration(origin).then((ok) => callback(null, ok), (error: Error) => callback(error, false));
    },
    methods: ['GET', 'POST'],
    allowedHeaders: ['Authorization', 'Content-Type', 'If-None-Match'],
    exposedHeaders: ['ETag', 'Retry-After'],
    maxAge: 600,
  });
}
