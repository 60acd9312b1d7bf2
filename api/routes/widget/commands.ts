/** POST /widget/commands (spec section 4): controls for the agent's call, deduplicated by request_id. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { Command, CommandResult } from '../../../shared/schemas/widget-api.js';
import { widgetOf } from '../../http/auth.js';
import { errorResponses } from '../../http/schemas.js';
import type { Services } from '../../services.js';

export const commandRoutes =
  (services: Services): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/widget/commands',
      {
        schema: {
          summary: "Send a control to the agent's call",
          description:
            'status: queued (for the call window), done (carried out: hangup, decline, availability), delivered, failed. ' +
            'A request_id already seen returns the first result and is not executed again. 502 hangup_uncertain when the provider cannot be reached.',
          tags: ['widget token'],
          security: [{ widgetToken: [] }],
          body: Command,
          response: { 200: CommandResult, ...errorResponses(401, 403, 409, 422, 429, 502) },
        },
      },
      async (request) => services.commands.execute(widgetOf(request), request.body),
    );
  };
