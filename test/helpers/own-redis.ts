/** A Redis server of a test's own, which the test may stop and start again without touching the shared one. */
import type { Bus } from '../../api/bus/index.js';
import { freePort, spawnRedis, waitFor } from './processes.js';

export async function ownRedis() {
  const port = await freePort();
  const server = spawnRedis(port);
  await server.start();
  return { url: `redis://127.0.0.1:${port}`, stop: () => server.stop(), start: () => server.start() };
}

/** Waits (up to 20 s) until the bus has noticed Redis going or coming back. */
export function busReaches(bus: Bus, state: 'up' | 'down', what: string): Promise<true> {
  return waitFor(async () => (bus.state() === state ? true : undefined), what, 20_000);
}
