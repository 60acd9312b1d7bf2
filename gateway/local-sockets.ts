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
  /**
   * A key one socket holds maps to that socket, a key several hold to a Set of them. Most keys (a
   * widget session, an engine, a member with one window) have a single socket, and a Set for each
   * would weigh more than the rest of the socket's entries here.
   */
  readonly #byKey = new Map<string, Socket | Set<Socket>>();

  /** Indexes a connected socket; remove() it when it disconnects. */
  add(socket: Socket): void {
    for (const key of keysOf(socket.data as SocketData)) {
      const held = this.#byKey.get(key);
      if (held === undefined) this.#byKey.set(key, socket);
      else if (held instanceof Set) held.add(socket);
      else if (held !== socket) this.#byKey.set(key, new Set([held, socket]));
    }
  }

  remove(socket: Socket): void {
    for (const key of keysOf(socket.data as SocketData)) {
      const held = this.#byKey.get(key);
      if (held === socket) {
        this.#byKey.delete(key);
      } else if (held instanceof Set && held.delete(socket) && held.size === 1) {
        const [last] = held;
        this.#byKey.set(key, last!);
      }
    }
  }

  /** A copy: ending sockets while iterating removes them from the index. */
  get(key: SocketKey): Socket[] {
    const held = this.#byKey.get(key);
    if (held === undefined) return [];
    return held instanceof Set ? [...held] : [held];
  }
}
