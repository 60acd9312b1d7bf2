/**
 * What a connection may not do, whatever its credential:
 * - leave what it is sent unread without bound. A long-polling client that sends requests but never
 *   fetches the answers (GET) has them queued in engine.io's write buffer, which has no cap: one
 *   token could grow a node by gigabytes in a minute and crash it. A WebSocket whose reader stops
 *   has what the kernel cannot take held by uWS, which past its backpressure limit drops messages
 *   (engine.io ignores send()'s result, so silently: the client would stay connected and stale,
 *   and a widget polls only once a minute while its socket is up). A connection with more than
 *   MAX_UNREAD_PACKETS waiting, or MAX_UNSENT_BYTES held by uWS, is closed, long before uWS would
 *   drop anything (WS_MAX_BACKPRESSURE); the client reconnects and gets the current snapshot.
 *   Checked on every event it sends, and once a second for all of the node's connections (pushes
 *   pile up too);
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
/** Past the kernel's socket buffers (megabytes): a reader that keeps up never leaves uWS holding this. */
export const MAX_UNSENT_BYTES = 256 * 1024;
/** uWS's limit, given to engine.io: far enough above MAX_UNSENT_BYTES that a second's pushes cannot reach it before the sweep. */
export const WS_MAX_BACKPRESSURE = 16 * 1024 * 1024;
export const UNREAD_SWEEP_MS = 1000;

/** The engine.io connection under a socket, as far as these checks read it. */
interface Connection {
  writeBuffer: unknown[];
  /** over WebSocket, the uWS socket (long-polling has none) */
  transport: { socket?: { getBufferedAmount?: () => number; close?: () => void } };
  /** with discard, at once: without, engine.io waits for the buffer to drain, which this client never does */
  close(discard: true): void;
}

function unsentBytes(connection: Connection): number {
  try {
    return connection.transport.socket?.getBufferedAmount?.() ?? 0;
  } catch {
    return 0; // a uWS socket already closed throws; engine.io is letting the connection go
  }
}

function overflowing(connection: Connection): boolean {
  return connection.writeBuffer.length > MAX_UNREAD_PACKETS || unsentBytes(connection) > MAX_UNSENT_BYTES;
}

/**
 * Closes the connection at once. A WebSocket is closed by uWS without its closing handshake (which
 * would wait behind what the reader does not read, holding it); uWS tells engine.io, which lets the
 * connection go as for any drop.
 */
function letGo(connection: Connection, metrics: Metrics): void {
  metrics.unreadOverflows.inc();
  const ws = connection.transport.socket;
  try {
    if (ws?.close) return ws.close();
  } catch {
    // already closed by uWS: engine.io is letting it go
  }
  connection.close(true);
}

/**
 * Socket.IO's own events on every socket, not ones a client has: it listens to `error` itself (a
 * no-op), so a client's `error` event would find a listener and never be answered.
 */
const RESERVED = new Set(['disconnect', 'disconnecting', 'error']);

/**
 * Every event a socket sends passes here first (Socket.IO's onAny, shared by every socket and
 * called with the socket as `this`); those its kind has handlers for (connections.ts registers
 * them) go on to them.
 */
export function guardEvents(metrics: Metrics) {
  return function guard(this: Socket, event: string, ...args: unknown[]): void {
    if (overflowing(this.conn as unknown as Connection)) return letGo(this.conn as unknown as Connection, metrics);
    if (!RESERVED.has(event) && this.listenerCount(event) > 0) return;
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
      if (overflowing(connection)) letGo(connection, metrics);
    }
  };
  timer = clock.after(UNREAD_SWEEP_MS, sweep);
  return () => timer.cancel();
}
