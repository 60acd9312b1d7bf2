/**
 * Builds the browser bundles with esbuild (`npm run build:browser`; `npm start` runs it first):
 * - the SDK as an IIFE defining the global ServiceClick2Call (served at /assets/js/click2call-sdk.js),
 *   socket.io-client included, and as ESM for bundler users (socket.io-client left external);
 * - the call window's script, its heartbeat worker and the Twilio voice driver (loaded only when
 *   the Twilio driver is used, so simulated windows never download the voice SDK).
 * It reports the gzip size of the SDK IIFE against the 30 KB budget.
 */
import { build, type BuildOptions, type Plugin } from 'esbuild';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

const ROOT = join(import.meta.dirname, '..');
export const SDK_BUDGET_GZIP_BYTES = 30 * 1024;

/**
 * The SDK and the window ask socket.io-client for WebSocket and long-polling only
 * (sdk/src/transport.ts, window/src/socket.ts), and the gateway (uWebSockets.js) offers no
 * WebTransport: engine.io-client's WebTransport transport, which it imports with the others, is
 * never made. The bundles that include socket.io-client get a stub in its place (about 0.9 KB,
 * 0.4 KB gzip: what keeps the SDK within its budget).
 */
const withoutWebTransport: Plugin = {
  name: 'without-webtransport',
  setup(build) {
    build.onResolve({ filter: /\/webtransport\.js$/ }, (args) => (args.importer.includes('engine.io-client') ? { path: 'webtransport', namespace: 'c2c-stub' } : undefined));
    build.onLoad({ filter: /.*/, namespace: 'c2c-stub' }, () => ({
      contents: 'export class WT { constructor() { throw new Error("WebTransport is not part of this bundle: ask for websocket or polling"); } }',
      loader: 'js',
    }));
  },
};

const common: BuildOptions = {
  bundle: true,
  minify: true,
  sourcemap: true,
  target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
  legalComments: 'none',
  logLevel: 'warning',
  plugins: [withoutWebTransport],
};

export interface BrowserBuild {
  sdkGzipBytes: number;
  withinBudget: boolean;
}

export async function buildBrowser(): Promise<BrowserBuild> {
  const sdkEntry = join(ROOT, 'sdk', 'src', 'index.ts');
  await build({ ...common, entryPoints: [sdkEntry], format: 'iife', globalName: 'ServiceClick2Call', outfile: join(ROOT, 'sdk', 'dist', 'click2call-sdk.js') });
  await build({ ...common, entryPoints: [sdkEntry], format: 'esm', external: ['socket.io-client'], outfile: join(ROOT, 'sdk', 'dist', 'esm', 'index.js') });
  const windowEntries: Array<[string, string]> = [
    ['main.ts', 'click2call-window.js'],
    ['heartbeat-worker.ts', 'click2call-heartbeat-worker.js'],
    ['drivers/twilio-entry.ts', 'click2call-twilio.js'],
  ];
  for (const [entry, out] of windowEntries) {
    const path = join(ROOT, 'window', 'src', entry);
    if (existsSync(path)) await build({ ...common, entryPoints: [path], format: 'iife', outfile: join(ROOT, 'window', 'dist', out) });
  }
  const sdkGzipBytes = gzipSync(readFileSync(join(ROOT, 'sdk', 'dist', 'click2call-sdk.js')), { level: 9 }).length;
  return { sdkGzipBytes, withinBudget: sdkGzipBytes <= SDK_BUDGET_GZIP_BYTES };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const result = await buildBrowser();
  const kb = (result.sdkGzipBytes / 1024).toFixed(1);
  console.log(`SDK IIFE (socket.io-client included): ${kb} KB gzip — budget 30 KB: ${result.withinBudget ? 'within' : 'OVER'}`);
}
