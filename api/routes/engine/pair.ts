/** POST /engine/pair (spec section 4): a call window consumes its launch ticket and becomes the engine. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { LIMITS } from '../../../shared/limits.js';
import { PairRequest, Paired } from '../../../shared/schemas/engine-api.js';
import { toEngine, toWidgetAgent } from '../../domain/views.js';
import { usePairingGuard } from '../../http/auth.js';
import { errorResponses } from '../../http/schemas.js';
import type { Services } from '../../services.js';

export const pairRoutes =
  (services: Services): FastifyPluginAsyncZod =>
  async (app) => {
    usePairingGuard(app, services);
    app.post(
      '/engine/pair',
      {
        schema: {
          summary: 'Pair a call window with its launch ticket',
          description:
            '401 ticket_invalid for an unknown, expired or already used ticket. 409 agent_busy when the agent\'s current window is on a call ' +
            '(the ticket stays unused); otherwise a new window replaces the old one. 422 invalid_request for `simulated: true` where the ' +
            'operator refuses simulated engines (SIMULATED_ENGINES=refuse; the ticket stays unused).',
          tags: ['engine'],
          body: PairRequest,
          response: { 201: Paired, ...errorResponses(401, 403, 409, 422, 429) },
        },
      },
      async (request, reply) => {
        const pairing = await services.engines.pair(request.body);
        return reply.code(201).send({
          ok: true as const,
          engine_token: pairing.token,
          engine: toEngine(pairing.engine, services.clock.now()),
          integration_id: pairing.integration.id,
          integration_name: pairing.integration.name,
          agent: toWidgetAgent(pairing.integration, pairing.agent),
          policy: pairing.agent.effective.policy,
          voice_provider: pairing.engine.simulated ? ('simulated' as const) : services.providers.configured.name,
          heartbeat_ms: LIMITS.heartbeatMs,
          heartbeat_fallback_ms: LIMITS.heartbeatFallbackMs,
          realtime: services.realtime,
        });
      },
    );
  };
