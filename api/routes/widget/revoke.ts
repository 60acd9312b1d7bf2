/**
 * POST /widget/revoke (spec section 4): ends the widget session (logout). Behind the holder's hook
 * (http/auth.ts): the token, its life and its Origin are checked, the policy is not.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { WidgetRevoke } from '../../../shared/schemas/widget-api.js';
import { widgetHolderOf } from '../../http/auth.js';
import { errorResponses } from '../../http/schemas.js';
import type { Services } from '../../services.js';

export const revokeRoutes =
  (services: Services): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/widget/revoke',
      {
        schema: {
          summary: 'End this widget session (logout); the call and the call window go on',
          description: "Taken from the token's own origin even while the agent or the integration is refused: a logout always ends the session.",
          tags: ['widget token'],
          security: [{ widgetToken: [] }],
          response: { 200: WidgetRevoke, ...errorResponses(401, 403, 429) },
        },
      },
      async (request) => {
        await services.sessions.revoke(widgetHolderOf(request));
        return { ok: true as const, revoked: true as const };
      },
    );
  };
