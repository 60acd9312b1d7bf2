/**
 * Browser assets on {site_url} (spec section 4, "Web pages"): the SDK script and the call window's
 * scripts, built by scripts/build-browser.ts. Only the built bundles are served.
 */
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync } from 'fastify';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..', '..');
export const ASSET_DIRS = [join(ROOT, 'sdk', 'dist'), join(ROOT, 'window', 'dist')];

export const assetRoutes: FastifyPluginAsync = async (app) => {
  const roots = ASSET_DIRS.filter((dir) => existsSync(dir));
  if (roots.length === 0) {
    app.log.warn('browser bundles are not built (npm run build:browser): the SDK and call window are unavailable');
    return;
  }
  await app.register(fastifyStatic, {
    root: roots,
    prefix: '/assets/js/',
    // Integrators' pages load the SDK cross-origin; scripts are public.
    setHeaders: (res) => {
      res.header('access-control-allow-origin', '*');
      res.header('cache-control', 'public, max-age=300');
    },
    allowedPath: (path) => /^\/[a-z0-9-]+\.js(\.map)?$/.test(path) || /^\/esm\/index\.js(\.map)?$/.test(path),
    index: false,
    list: false,
    wildcard: true,
  });
};
