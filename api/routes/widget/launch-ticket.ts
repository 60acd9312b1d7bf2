/** POST /widget/launch-ticket (spec section 4): a single-use ticket to open the call window. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { LaunchTicket } from '../../../shared/schemas/widget-api.js';
import { issueTicket } from '../../domain/tickets.js';
import { widgetOf } from '../../http/auth.js';
import { errorResponses } from '../../http/schemas.js';
import type { Services } from '../../services.js';

export const launchTicketRoutes =
  (services: Services): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/widget/launch-ticket',
      {
        schema: {
          summary: 'A single-use launch ticket for the call window',
          description: 'window_url carries the ticket in its fragment (#ticket=…), never in the query. The ticket lives 10 minutes.',
          tags: ['widget token'],
          security: [{ widgetToken: [] }],
          response: { 200: LaunchTicket, ...errorResponses(401, 403, 429) },
        },
      },
      async (request) => {
        const ticket = await issueTicket(services.db, services.clock, services.config.siteUrl, widgetOf(request));
        return { ok: true as const, ticket: ticket.ticket, window_url: ticket.windowUrl, expires_in: ticket.expiresIn, window_name: ticket.windowName };
      },
    );
  };
