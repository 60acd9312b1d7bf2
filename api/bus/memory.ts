/** The in-process bus: one node, synchronous delivery. */
import type { Bus, BusMessage } from './bus.js';

export function createMemoryBus(): Bus {
  const handlers = new Set<(message: BusMessage) => void>();
  return {
    driver: 'memory',
    publish(message) {
      for (const handler of [...handlers]) handler(message);
    },
    subscribe(handler) {
      handlers.add(handler);
      return () => handlers.delete(handler);
    },
    state: () => 'up',
    async close() {
      handlers.clear();
    },
  };
}
