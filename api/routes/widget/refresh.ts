/** POST /widget/refresh (spec section 4): renew the widget session. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { WidgetRefresh } from '../../../shared/schemas/widget-api.js';
import { seconds } from '../../clock.js';
import { widgetOf } from '../../http/auth.js';
import { errorResponses } from '../../http/schemas.js';
import type { Services } from '../../services.js';

export const refreshRoutes =
  (services: Services): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/widget/refresh',
      {
        schema: {
          summary: 'A new widget token for the same agent and origin',
          description: 'The previous token keeps working for 30 seconds, for requests already in flight.',
          tags: ['widget token'],
          security: [{ widgetToken: [] }],
          response: { 200: WidgetRefresh, ...errorResponses(401, 403, 429) },
        },
      },
      async (request) => {
        const fresh = await services.sessions.refresh(widgetOf(request));
        return { ok: true as const, widget_token: fresh.token, expires_at: seconds(fresh.expiresAt) };
      },
    );
  };
