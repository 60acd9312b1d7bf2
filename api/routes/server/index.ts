/** Server-key endpoints (spec section 4), behind the server-key hook. */
import type { FastifyPluginAsync } from 'fastify';
import { useServerKeyAuth } from '../../http/auth.js';
import type { Services } from '../../services.js';
import { callRoutes } from './calls.js';
import { sessionRoutes } from './sessions.js';
import { simulatedRoutes } from './simulated.js';

export const serverKeyRoutes =
  (services: Services): FastifyPluginAsync =>
  async (app) => {
    useServerKeyAuth(app, services);
    await app.register(sessionRoutes(services));
    await app.register(callRoutes(services));
    if (services.config.voiceProvider === 'simulated' || services.config.demo) await app.register(simulatedRoutes(services));
  };
