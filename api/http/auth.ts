/**
 * Credential hooks, one per route group (spec section 5). Each runs on onRequest, before the body
 * is read: platform switch → per-IP rate limit → credential → per-subject rate limit.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { bearerToken } from '../domain/credentials.js';
import { authenticateServerKey, type ServerKeyContext } from '../domain/server-keys.js';
import type { WidgetContext, WidgetSessionRow } from '../domain/sessions.js';
import type { EngineContext } from '../domain/engines/auth.js';
import type { Services } from '../services.js';

declare module 'fastify' {
  interface FastifyRequest {
    serverKey?: ServerKeyContext;
    widget?: WidgetContext;
    widgetHolder?: WidgetSessionRow;
    engine?: EngineContext;
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

export function widgetHolderOf(request: FastifyRequest): WidgetSessionRow {
  if (!request.widgetHolder) throw new Error('route is missing the widget holder hook');
  return request.widgetHolder;
}

export function engineOf(request: FastifyRequest): EngineContext {
  if (!request.engine) throw new Error('route is missing the engine hook');
  return request.engine;
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

/** The widget hook without the policy's outcome (sessions.authenticateHolder): POST /widget/revoke. */
export function useWidgetHolderAuth(app: FastifyInstance, services: Services): void {
  app.addHook('onRequest', async (request) => {
    if (request.method === 'OPTIONS') return;
    await services.platform.assertEnabled();
    await app.limits.widgetPerIp(request);
    request.widgetHolder = await services.sessions.authenticateHolder(bearerToken(request.headers.authorization), request.headers.origin);
  });
}

/**
 * Engine routes (all but pair, whose credential is the ticket in its body). Limited per engine,
 * never per address: a call centre's windows share one, and an address-wide refusal would stop
 * every window's heartbeats there (README decision rows "engine rate limit", "refused credentials").
 */
export function useEngineAuth(app: FastifyInstance, services: Services): void {
  app.addHook('onRequest', async (request) => {
    if (request.method === 'OPTIONS') return;
    await services.platform.assertEnabled();
    request.engine = await services.engines.authenticate(bearerToken(request.headers.authorization));
    await app.limits.enginePerEngine(request, request.engine.engine.id);
  });
}

/** Pairing: the platform switch and the per-IP widget limit; the ticket is checked by the handler. */
export function usePairingGuard(app: FastifyInstance, services: Services): void {
  app.addHook('onRequest', async (request) => {
    if (request.method === 'OPTIONS') return;
    await services.platform.assertEnabled();
    await app.limits.widgetPerIp(request);
  });
}
