/**
 * Builds the browser bundles with esbuild (`npm run build:browser`; `npm start` runs it first):
 * - the SDK as an IIFE defining the global ServiceClick2Call (served at /assets/js/click2call-sdk.js),
 *   socket.io-client included, and as ESM for bundler users (socket.io-client left external);
 * - the call window's script, its heartbeat worker and the Twilio voice driver (loaded only when
 *   the Twilio driver is used, so simulated windows never download the voice SDK).
 * It reports the gzip size of the SDK IIFE against the 30 KB budget.
 */
import { build, type BuildOptions } from 'esbuild';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

const ROOT = join(import.meta.dirname, '..');
export const SDK_BUDGET_GZIP_BYTES = 30 * 1024;

const common: BuildOptions = { bundle: true, minify: true, sourcemap: true, target: ['es2020', 'chrome100', 'firefox100', 'safari15'], legalComments: 'none', logLevel: 'warning' };

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
