/**
 * POST /simulated/inbound-calls: an incoming call through the simulated provider, for the demo and
 * integrators' CI. It exists only while the service runs the simulated provider (or the demo).
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { C2CError } from '../../../shared/errors.js';
import { Call } from '../../../shared/schemas/resources.js';
import { serverKeyOf } from '../../http/auth.js';
import { errorResponses } from '../../http/schemas.js';
import type { Services } from '../../services.js';

export const InboundCallRequest = z
  .strictObject({
    integration_id: z.string().min(1).max(64),
    from: z.string().max(32),
    agent: z.strictObject({ type: z.literal('email'), value: z.string().min(1).max(254) }).optional(),
    caller_name: z.string().max(120).optional(),
  })
  .meta({ id: 'InboundCallRequest' });

export const simulatedRoutes =
  (services: Services): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/simulated/inbound-calls',
      {
        schema: {
          summary: 'Simulated provider only: ring a routable agent with an incoming call',
          description: 'Routable: integration and member enabled, incoming allowed, window live, registered, with a microphone, Available and not on a call. 409 agent_offline when nobody is.',
          tags: ['simulated'],
          security: [{ serverKey: [] }],
          body: InboundCallRequest,
          response: { 201: Call, ...errorResponses(401, 403, 404, 409, 422, 429) },
        },
        config: { fieldCodes: [['from', 'invalid_phone_number']] },
      },
      async (request, reply) => {
        const { integration } = serverKeyOf(request);
        if (request.body.integration_id !== integration.id) throw new C2CError('integration_mismatch');
        const call = await services.calls.injectInbound({
          integrationId: integration.id,
          from: request.body.from,
          memberEmail: request.body.agent?.value,
          callerName: request.body.caller_name,
        });
        return reply.code(201).send({ ok: true as const, ...call });
      },
    );
  };
