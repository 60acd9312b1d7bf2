/** Widget-token endpoints (spec section 4), with CORS for allowed origins and the widget hook. */
import type { FastifyPluginAsync } from 'fastify';
import { useWidgetAuth } from '../../http/auth.js';
import { useWidgetCors } from '../../http/cors.js';
import type { Services } from '../../services.js';
import { commandRoutes } from './commands.js';
import { launchTicketRoutes } from './launch-ticket.js';
import { widgetSessionRoutes } from './session.js';
import { stateRoutes } from './state.js';

export const widgetRoutes =
  (services: Services): FastifyPluginAsync =>
  async (app) => {
    await useWidgetCors(app, services);
    useWidgetAuth(app, services);
    await app.register(stateRoutes(services));
    await app.register(launchTicketRoutes(services));
    await app.register(commandRoutes(services));
    await app.register(widgetSessionRoutes(services));
  };
