/**
 * The bus's Socket.IO server, which a gateway attaches to its uWS app: each driver makes it with
 * its own adapter, so room events from any node reach this node's sockets.
 */
import { Server, type ServerOptions } from 'socket.io';
import { LIMITS } from '../../shared/limits.js';
import { SOCKET_PING_INTERVAL_MS, SOCKET_PING_TIMEOUT_MS } from '../../shared/events.js';

export const SOCKET_CONNECT_TIMEOUT_MS = 20_000;

export function createSocketServer(options: Partial<ServerOptions> = {}): Server {
  return new Server({
    serveClient: false,
    // A socket message is no larger than a REST body may be (engine.io's default is 1 MB, which a
    // page could make the gateway buffer and parse for every message); larger closes the connection.
    maxHttpBufferSize: LIMITS.requestMaxBytes,
    // A client sends its CONNECT (with its token) as soon as the transport is open; a connection
    // not in the namespace within this (its token checked: up to 15 s on a store slow to answer,
    // which then refuses it service_unavailable) is closed. Socket.IO's default, 45 s, let anyone
    // hold a descriptor that long per connection without presenting any credential.
    connectTimeout: SOCKET_CONNECT_TIMEOUT_MS,
    // dead connections go within 20 s (shared/events.ts)
    pingInterval: SOCKET_PING_INTERVAL_MS,
    pingTimeout: SOCKET_PING_TIMEOUT_MS,
    ...options,
  });
}

/**
 * Closes a socket.io server whether or not a gateway ever attached it to a uWS app. Its own
 * sockets only: io.disconnectSockets() goes through the adapter to every node of the cluster, so
 * one node stopping (an API node in a rolling deploy) would cut every socket on every gateway.
 */
export function closeIo(io: Server): void {
  io.local.disconnectSockets(true);
  // io.close() reaches for the engine, which only exists once the server was attached.
  if ((io as unknown as { engine?: unknown }).engine) void io.close();
}
