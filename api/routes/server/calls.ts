/** POST /calls, GET /calls/{id}, POST /calls/{id}/hangup (spec section 4), scoped to the key's integration. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { Call } from '../../../shared/schemas/resources.js';
import { CallIdParams, CallRequest, IdempotencyHeaders } from '../../../shared/schemas/server-api.js';
import { serverKeyOf } from '../../http/auth.js';
import { errorResponses } from '../../http/schemas.js';
import type { Services } from '../../services.js';

export const callRoutes =
  (services: Services): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/calls',
      {
        schema: {
          summary: 'Request an outgoing call',
          description:
            'Checks run in this order: integration, agent, number, account, engine. With an Idempotency-Key, ' +
            'a replay with the same body answers 200 with the same intent; a different body answers 409 idempotency_conflict.',
          tags: ['server key'],
          security: [{ serverKey: [] }],
          headers: IdempotencyHeaders,
          body: CallRequest,
          response: { 200: Call, 202: Call, ...errorResponses(401, 402, 403, 404, 409, 422, 429) },
        },
        config: {
          fieldCodes: [
            ['integration_id', 'invalid_request'],
            ['agent', 'identifier_mode'],
            ['phone_number', 'invalid_phone_number'],
          ],
        },
      },
      async (request, reply) => {
        const { integration } = serverKeyOf(request);
        const result = await services.calls.create(integration, request.body, request.headers['idempotency-key']);
        return reply.code(result.replayed ? 200 : 202).send({ ok: true as const, ...result.view });
      },
    );

    app.get(
      '/calls/:id',
      {
        schema: {
          summary: 'Call status',
          tags: ['server key'],
          security: [{ serverKey: [] }],
          params: CallIdParams,
          response: { 200: Call, ...errorResponses(401, 403, 404, 429) },
        },
      },
      async (request) => {
        const { integration } = serverKeyOf(request);
        return { ok: true as const, ...(await services.calls.get(integration.id, request.params.id)) };
      },
    );

    app.post(
      '/calls/:id/hangup',
      {
        schema: {
          summary: 'End a call',
          description: 'Answers 200 with the call ending or ended; 502 hangup_uncertain when the voice provider cannot be reached.',
          tags: ['server key'],
          security: [{ serverKey: [] }],
          params: CallIdParams,
          response: { 200: Call, ...errorResponses(401, 403, 404, 429, 502) },
        },
      },
      async (request) => {
        const { integration } = serverKeyOf(request);
        return { ok: true as const, ...(await services.calls.hangupByServer(integration.id, request.params.id)) };
      },
    );
  };
