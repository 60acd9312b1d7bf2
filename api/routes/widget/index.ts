/** Widget-token endpoints (spec section 4), behind the widget hook (CORS is the API's, see http/cors.ts). */
import type { FastifyPluginAsync } from 'fastify';
import { useWidgetAuth } from '../../http/auth.js';
import type { Services } from '../../services.js';
import { commandRoutes } from './commands.js';
import { launchTicketRoutes } from './launch-ticket.js';
import { widgetSessionRoutes } from './session.js';
import { stateRoutes } from './state.js';

export const widgetRoutes =
  (services: Services): FastifyPluginAsync =>
  async (app) => {
    useWidgetAuth(app, services);
    await app.register(stateRoutes(services));
    await app.register(launchTicketRoutes(services));
    await app.register(commandRoutes(services));
    await app.register(widgetSessionRoutes(services));
  };
