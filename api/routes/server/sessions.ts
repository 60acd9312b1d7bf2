/** POST /sessions (spec section 4): a widget session for one agent on one origin. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { Session, SessionRequest } from '../../../shared/schemas/server-api.js';
import { toEngine, toWidgetAgent } from '../../domain/views.js';
import { loadAgentState } from '../../domain/agent-state.js';
import { serverKeyOf } from '../../http/auth.js';
import { errorResponses } from '../../http/schemas.js';
import type { Services } from '../../services.js';
import { seconds } from '../../clock.js';

export const sessionRoutes =
  (services: Services): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/sessions',
      {
        schema: {
          summary: 'Create a widget session for one agent on one origin',
          tags: ['server key'],
          security: [{ serverKey: [] }],
          body: SessionRequest,
          response: { 201: Session, ...errorResponses(401, 403, 404, 409, 422, 429) },
        },
        config: {
          fieldCodes: [
            ['integration_id', 'invalid_request'],
            ['origin', 'invalid_request'],
            ['agent', 'identifier_mode'],
          ],
        },
      },
      async (request, reply) => {
        const { integration, keyId } = serverKeyOf(request);
        const session = await services.sessions.create(integration, keyId, request.body);
        const state = await loadAgentState(services.db, integration.id, session.agent.member.id);
        const now = services.clock.now();
        return reply.code(201).send({
          ok: true as const,
          widget_token: session.token,
          expires_at: seconds(session.expiresAt),
          agent: toWidgetAgent(integration, session.agent),
          policy: session.agent.effective.policy,
          engine: state.engine ? toEngine(state.engine, now) : null,
          realtime: services.realtime,
        });
      },
    );
  };
