/**
 * Real Chromium for browser suites (playwright-core with Debian's Chromium; `npx playwright
 * install` cannot work here), and the whole stack they drive: the service (API + gateway) and the
 * demo CRM, on free ports, with the browser bundles freshly built.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import type { Clock } from '../../api/clock.js';
import { loadConfig, type Config } from '../../api/config.js';
import type { DemoCredentials } from '../../api/demo/seed.js';
import { startNode, type RunningNode } from '../../api/serve.js';
import { buildBrowser } from '../../scripts/build-browser.js';
import { freePort } from './processes.js';

let announced = false;

/** Chromium's path, or undefined (with one line) on a laptop without it; CI must have it. */
export function chromiumPath(): string | undefined {
  const path = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
  if (existsSync(path)) return path;
  if (process.env.CI) throw new Error(`Chromium not found at ${path}: the browser suites may not skip in CI.`);
  if (!announced) {
    announced = true;
    console.warn(`skipping browser suites: Chromium not found at ${path} (apt-get install chromium, or set CHROMIUM_PATH)`);
  }
  return undefined;
}

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath()!,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--use-fake-ui-for-media-stream',
      '--use-fake-device-for-media-stream',
    ],
  });
}

export interface Stack {
  node: RunningNode;
  config: Config;
  crmUrl: string;
  demo: DemoCredentials;
  close(): Promise<void>;
}

/** `clock`: the service's, for suites that move time (a page's clock moved with it: Playwright's clock.install). */
export async function startStack(env: Record<string, string> = {}, { clock }: { clock?: Clock } = {}): Promise<Stack> {
  await buildBrowser();
  const dataDir = mkdtempSync(join(tmpdir(), 'c2c-browser-'));
  const [port, gatewayPort, demoPort] = await Promise.all([freePort(), freePort(), freePort()]);
  const config = loadConfig({
    PORT: String(port),
    GATEWAY_PORT: String(gatewayPort),
    DEMO_PORT: String(demoPort),
    C2C_DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    ...env,
  });
  const node = await startNode(config, { demo: true, logger: false, ...(clock ? { clock } : {}) });
  const demo = JSON.parse(readFileSync(join(dataDir, 'demo.json'), 'utf8')) as DemoCredentials;
  return {
    node,
    config,
    crmUrl: `http://127.0.0.1:${demoPort}`,
    demo,
    async close() {
      await node.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
