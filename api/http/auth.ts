/**
 * Credential hooks, one per route group (spec section 5). Each runs on onRequest, before the body
 * is read: platform switch → per-IP rate limit → credential → per-subject rate limit.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { bearerToken } from '../domain/credentials.js';
import { authenticateServerKey, type ServerKeyContext } from '../domain/server-keys.js';
import type { WidgetContext } from '../domain/sessions.js';
import type { Services } from '../services.js';

declare module 'fastify' {
  interface FastifyRequest {
    serverKey?: ServerKeyContext;
    widget?: WidgetContext;
  }
}

/** The authenticated context of a request, for handlers behind the matching hook. */
export function serverKeyOf(request: FastifyRequest): ServerKeyContext {
  if (!request.serverKey) throw new Error('route is missing the server-key hook');
  return request.serverKey;
}

export function widgetOf(request: FastifyRequest): WidgetContext {
  if (!request.widget) throw new Error('route is missing the widget hook');
  return request.widget;
}

export function useServerKeyAuth(app: FastifyInstance, services: Services): void {
  app.addHook('onRequest', async (request) => {
    await services.platform.assertEnabled();
    await app.limits.serverKeyPerIp(request);
    request.serverKey = await authenticateServerKey(services.db, bearerToken(request.headers.authorization));
    await app.limits.serverKeyPerIntegration(request, request.serverKey.integration.id);
  });
}

export function useWidgetAuth(app: FastifyInstance, services: Services): void {
  app.addHook('onRequest', async (request) => {
    if (request.method === 'OPTIONS') return; // CORS preflight carries no credential
    await services.platform.assertEnabled();
    await app.limits.widgetPerIp(request);
    request.widget = await services.sessions.authenticate(bearerToken(request.headers.authorization), request.headers.origin);
  });
}
