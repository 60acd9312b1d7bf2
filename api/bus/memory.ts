/** The in-process bus: one node, synchronous delivery, socket.io's in-memory adapter. */
import { closeIo, createSocketServer } from './socket-server.js';
import type { Bus, BusHandler } from './bus.js';

export function createMemoryBus(): Bus {
  const handlers = new Set<BusHandler>();
  const io = createSocketServer();
  return {
    driver: 'memory',
    io,
    publish(message) {
      for (const handler of [...handlers]) handler(message, { local: true });
    },
    subscribe(handler) {
      handlers.add(handler);
      return () => handlers.delete(handler);
    },
    // one node: every message is only this node's
    resyncHere() {
      this.publish({ type: 'resync' });
    },
    mayHaveListeners: (room) => io.sockets.adapter.rooms.has(room),
    // In one process a room receives from the moment it is joined.
    roomsJoined: () => Promise.resolve(),
    relayedCount: () => 0,
    state: () => 'up',
    async close() {
      handlers.clear();
      closeIo(io);
    },
  };
}
