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

/** The key of the socket's credential: its widget session (one per token) or its engine. */
export function ownerOf(data: SocketData): SocketKey {
  return data.kind === 'widget' ? `session:${data.sessionId}` : `engine:${data.engineId}`;
}

export function keysOf(data: SocketData): SocketKey[] {
  return [ownerOf(data), `integration:${data.integrationId}`, `member:${data.memberId}`];
}

/** Up to this many sockets, a key's sockets are held in an array; beyond, in a Set. */
const FEW = 8;

type Held = Socket | Socket[] | Set<Socket>;

export class LocalSockets {
  /**
   * A key one socket holds maps to that socket, a key a few hold to an array of them, and a key
   * many hold (an integration's) to a Set. Most keys have a single socket (a widget session, an
   * engine) or a few (a member's widgets and window): a Set weighs some 160 bytes, an array of two
   * some 32, and finding a socket among a few is as quick in either.
   */
  readonly #byKey = new Map<string, Held>();

  /** Indexes a connected socket; remove() it when it disconnects. */
  add(socket: Socket): void {
    for (const key of keysOf(socket.data as SocketData)) {
      const held = this.#byKey.get(key);
      if (held === undefined) this.#byKey.set(key, socket);
      else if (held instanceof Set) held.add(socket);
      else if (Array.isArray(held)) {
        if (held.includes(socket)) continue;
        if (held.length < FEW) held.push(socket);
        else this.#byKey.set(key, new Set([...held, socket]));
      } else if (held !== socket) this.#byKey.set(key, [held, socket]);
    }
  }

  remove(socket: Socket): void {
    for (const key of keysOf(socket.data as SocketData)) {
      const held = this.#byKey.get(key);
      if (held === socket) {
        this.#byKey.delete(key);
      } else if (held instanceof Set) {
        // back to an array only at half the limit, so a key hovering at it does not flip on every change
        if (held.delete(socket) && held.size <= FEW / 2) this.#byKey.set(key, held.size === 1 ? [...held][0]! : [...held]);
      } else if (Array.isArray(held)) {
        const at = held.indexOf(socket);
        if (at < 0) continue;
        held.splice(at, 1);
        if (held.length === 1) this.#byKey.set(key, held[0]!);
      }
    }
  }

  /** How many sockets hold the key. */
  count(key: SocketKey): number {
    const held = this.#byKey.get(key);
    if (held === undefined) return 0;
    if (held instanceof Set) return held.size;
    return Array.isArray(held) ? held.length : 1;
  }

  /** A copy: ending sockets while iterating removes them from the index. */
  get(key: SocketKey): Socket[] {
    const held = this.#byKey.get(key);
    if (held === undefined) return [];
    if (held instanceof Set || Array.isArray(held)) return [...held];
    return [held];
  }
}
