/**
 * API answers are not kept by browsers or proxies unless a route says otherwise: many carry
 * credentials (a widget token, a launch ticket, an engine token, a voice token) or a call's
 * details, which a shared cache or the browser's disk cache would hold past their use. The
 * widget's state says its own (no-cache: kept, but revalidated with its ETag).
 */
import type { FastifyInstance } from 'fastify';

export function noStoreByDefault(app: FastifyInstance): void {
  app.addHook('onSend', async (_request, reply) => {
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
  });
}
