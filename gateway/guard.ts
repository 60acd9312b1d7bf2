/**
 * What a connection may not do, whatever its credential:
 * - leave what it is sent unread without bound. A long-polling client that sends requests but never
 *   fetches the answers (GET) has them queued in engine.io's write buffer, which has no cap: one
 *   token could grow a node by gigabytes in a minute and crash it. A WebSocket that stops reading
 *   is bounded by uWS (it drops writes past its backpressure limit). A connection with more than
 *   MAX_UNREAD_PACKETS waiting is closed: checked on every event it sends, and once a second for
 *   all of the node's connections (pushes pile up too);
 * - send an event its kind does not have (a widget's `heartbeat`, an engine's `command`, a typo)
 *   and wait for an answer that never comes: it is answered `invalid_request`.
 */
import type { Server, Socket } from 'socket.io';
import { C2CError } from '../shared/errors.js';
import type { Clock, Timer } from '../api/clock.js';
import type { Metrics } from '../api/metrics.js';
import type { SocketData } from './handshake.js';

/** A client that reads its answers holds a few at most; a thousand is one that does not. */
export const MAX_UNREAD_PACKETS = 1000;
export const UNREAD_SWEEP_MS = 1000;

/** The engine.io connection under a socket, as far as these checks read it. */
interface Connection {
  writeBuffer: unknown[];
  /** with discard, at once: without, engine.io waits for the buffer to drain, which this client never does */
  close(discard: true): void;
}

function overflowing(connection: Connection): boolean {
  return connection.writeBuffer.length > MAX_UNREAD_PACKETS;
}

/** Socket.IO's own event on every socket: not one a client sends. */
const RESERVED = new Set(['disconnect', 'disconnecting']);

/**
 * Every event a socket sends passes here first (Socket.IO's onAny, shared by every socket and
 * called with the socket as `this`); those its kind has handlers for (connections.ts registers
 * them) go on to them.
 */
export function guardEvents(metrics: Metrics) {
  return function guard(this: Socket, event: string, ...args: unknown[]): void {
    if (overflowing(this.conn as unknown as Connection)) {
      metrics.unreadOverflows.inc();
      (this.conn as unknown as Connection).close(true);
      return;
    }
    if (this.listenerCount(event) > 0) return;
    const reply = args.at(-1);
    if (typeof reply === 'function') {
      const events = this.eventNames().filter((name) => typeof name === 'string' && !RESERVED.has(name));
      const kind = (this.data as SocketData).kind;
      reply(new C2CError('invalid_request', `A ${kind} socket has no event '${String(event).slice(0, 40)}'; it sends ${events.join(' and ')}.`).toJSON());
    }
  };
}

/** Once a second, closes every connection of the node whose unread packets passed the bound. */
export function closeUnread(io: Server, clock: Clock, metrics: Metrics): () => void {
  let timer: Timer;
  const sweep = () => {
    timer = clock.after(UNREAD_SWEEP_MS, sweep);
    for (const connection of Object.values((io.engine as unknown as { clients: Record<string, Connection> }).clients)) {
      if (overflowing(connection)) {
        metrics.unreadOverflows.inc();
        connection.close(true);
      }
    }
  };
  timer = clock.after(UNREAD_SWEEP_MS, sweep);
  return () => timer.cancel();
}
