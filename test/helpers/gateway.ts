/** A harness whose changes reach sockets: pushes on, realtime available, a gateway on a free port. */
import { startGateway, type Gateway } from '../../gateway/server.js';
import type { Config } from '../../api/config.js';
import type { StoreDriver } from './env.js';
import { createHarness, type Harness, type HarnessOptions } from './harness.js';

export interface GatewayHarness {
  h: Harness;
  gateway: Gateway;
  /** the gateway's base URL, what socket clients connect to */
  url: string;
  close(): Promise<void>;
}

export async function createGatewayHarness(driver: StoreDriver, configOverrides: Partial<Config> = {}, options: HarnessOptions = {}): Promise<GatewayHarness> {
  const h = await createHarness(driver, configOverrides, options);
  h.services.realtime.available = true;
  h.services.pusher.start();
  const gateway = await startGateway(h.services, { port: 0, host: '127.0.0.1' });
  return {
    h,
    gateway,
    url: `http://127.0.0.1:${gateway.port}`,
    async close() {
      await gateway.close();
      await h.close();
    },
  };
}
