/**
 * GET /widget/state (spec section 4): the agent's WidgetState. This is the poll path, so it is
 * served from the per-agent cache, answers 304 to an If-None-Match of the current ETag, and
 * skips response validation (the shape is asserted by the contract tests instead).
 */
import type { FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { WidgetState } from '../../../shared/schemas/widget-api.js';
import { widgetOf } from '../../http/auth.js';
import { noneMatch } from '../../http/conditional.js';
import { errorResponses } from '../../http/schemas.js';
import type { Services } from '../../services.js';

const NotModified = z.null().describe('Not modified: the ETag still matches (no body)');

export const stateRoutes =
  (services: Services): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/widget/state',
      {
        schema: {
          summary: "The agent's WidgetState",
          description: 'Send If-None-Match with the last ETag: an unchanged state answers 304 with no body.',
          tags: ['widget token'],
          security: [{ widgetToken: [] }],
          response: { 200: WidgetState, 304: NotModified, ...errorResponses(401, 403, 429) },
        },
        serializerCompiler: () => (data) => JSON.stringify(data),
      },
      async (request, reply) => {
        const widget = widgetOf(request);
        const data = await services.widgetStates.load(widget.integration.id, widget.agent.member.id);
        const etag = services.widgetStates.etag(widget, data);
        reply.header('etag', etag).header('cache-control', 'no-cache');
        // A 304 carries no body at all (not even "null"): clients parse it by its headers alone.
        if (noneMatch(request.headers['if-none-match'], etag)) return (reply as unknown as FastifyReply).code(304).send();
        return services.widgetStates.render(widget, data);
      },
    );
  };
