/** Engine endpoints: pairing (ticket) and the engine-token group. */
import type { FastifyPluginAsync } from 'fastify';
import type { Services } from '../../services.js';
import { engineRoutes } from './engine.js';
import { pairRoutes } from './pair.js';

export const engineGroup =
  (services: Services): FastifyPluginAsync =>
  async (app) => {
    await app.register(pairRoutes(services));
    await app.register(engineRoutes(services));
  };
