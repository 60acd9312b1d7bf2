/** Engine endpoints: pairing (ticket) and the engine-token group. */
import type { FastifyPluginAsync } from 'fastify';
import { assertEngineOrigin } from '../../domain/engines/origins.js';
import type { Services } from '../../services.js';
import { engineRoutes } from './engine.js';
import { pairRoutes } from './pair.js';

export const engineGroup =
  (services: Services): FastifyPluginAsync =>
  async (app) => {
    // Engines run on the service's own pages or this installation's extensions (api/domain/engines/origins.ts).
    app.addHook('onRequest', async (request) => {
      const origin = request.headers.origin;
      if (origin !== undefined) assertEngineOrigin(services.config, origin);
    });
    await app.register(pairRoutes(services));
    await app.register(engineRoutes(services));
  };
