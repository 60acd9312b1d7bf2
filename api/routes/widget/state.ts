/** GET /widget/state (spec section 4): the agent's WidgetState. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { WidgetState } from '../../../shared/schemas/widget-api.js';
import { loadAgentState, renderWidgetState } from '../../domain/widget-state.js';
import { widgetOf } from '../../http/auth.js';
import { errorResponses } from '../../http/schemas.js';
import type { Services } from '../../services.js';

export const stateRoutes =
  (services: Services): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/widget/state',
      {
        schema: {
          summary: "The agent's WidgetState",
          tags: ['widget token'],
          security: [{ widgetToken: [] }],
          response: { 200: WidgetState, ...errorResponses(401, 403, 429) },
        },
      },
      async (request) => {
        const widget = widgetOf(request);
        const data = await loadAgentState(services.db, widget.integration.id, widget.agent.member.id);
        return renderWidgetState(
          data,
          { integration: widget.integration, agent: widget.agent, sessionExpiresAt: widget.session.expires_at, realtime: services.realtime },
          services.clock.now(),
        );
      },
    );
  };
