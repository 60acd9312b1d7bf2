/**
 * Widget-token endpoints (spec section 4), behind the widget hook (CORS is the API's, see
 * http/cors.ts); the revoke behind the holder's hook, which leaves out the policy.
 */
import type { FastifyPluginAsync } from 'fastify';
import { useWidgetAuth, useWidgetHolderAuth } from '../../http/auth.js';
import type { Services } from '../../services.js';
import { commandRoutes } from './commands.js';
import { launchTicketRoutes } from './launch-ticket.js';
import { refreshRoutes } from './refresh.js';
import { revokeRoutes } from './revoke.js';
import { stateRoutes } from './state.js';

export const widgetRoutes =
  (services: Services): FastifyPluginAsync =>
  async (app) => {
    await app.register(async (agent) => {
      useWidgetAuth(agent, services);
      await agent.register(stateRoutes(services));
      await agent.register(launchTicketRoutes(services));
      await agent.register(commandRoutes(services));
      await agent.register(refreshRoutes(services));
    });
    await app.register(async (holder) => {
      useWidgetHolderAuth(holder, services);
      await holder.register(revokeRoutes(services));
    });
  };
