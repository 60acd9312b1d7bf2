/**
 * A node that is stopping (serve.ts) answers the requests in flight; a request that still arrives
 * on one of their kept-alive connections (pipelined, or sent as the node began to stop) is told
 * to retry elsewhere, in the spec's envelope, and its connection closed. Fastify's own answer for
 * it (return503OnClosing) is a body of its own, which no client of this contract reads.
 */
import type { FastifyInstance } from 'fastify';
import { C2CError } from '../../shared/errors.js';

export function refuseWhileClosing(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', async (_request, reply) => {
    if (!closing) return;
    reply.header('connection', 'close');
    throw new C2CError('service_unavailable', 'This node is stopping; retry the request (another node will answer).', { retryAfter: 1 });
  });
}
