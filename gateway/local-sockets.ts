/**
 * This node's sockets, indexed by what can end them: their widget session or engine, their
 * integration, their member. Endings reach every node on the bus anyway, so finding the sockets one
 * ends is a local lookup. Socket.IO rooms are kept for what is pushed across nodes (an agent's
 * widgets, an engine's work): each room there costs adapter entries and, with the sharded Redis
 * adapter, a Redis subscription, which a lookup table does not.
 */
import type { Socket } from 'socket.io';
import type { SocketData } from './handshake.js';

export type SocketKey = `session:${string}` | `engine:${string}` | `integration:${string}` | `member:${string}`;

export function keysOf(data: SocketData): SocketKey[] {
  const owner: SocketKey = data.kind === 'widget' ? `session:${data.sessionId}` : `engine:${data.engineId}`;
  return [owner, `integration:${data.integrationId}`, `member:${data.memberId}`];
}

export class LocalSockets {
  readonly #byKey = new Map<string, Set<Socket>>();

  /** Indexes a connected socket until it disconnects. */
  add(socket: Socket): void {
    const keys = keysOf(socket.data as SocketData);
    for (const key of keys) {
      let set = this.#byKey.get(key);
      if (!set) this.#byKey.set(key, (set = new Set()));
      set.add(socket);
    }
    socket.once('disconnect', () => {
      for (const key of keys) {
        const set = this.#byKey.get(key);
        set?.delete(socket);
        if (set?.size === 0) this.#byKey.delete(key);
      }
    });
  }

  /** A copy: ending sockets while iterating removes them from the index. */
  get(key: SocketKey): Socket[] {
    return [...(this.#byKey.get(key) ?? [])];
  }
}
