/**
 * Ending connections the moment their credential stops being good: a widget session that ended,
 * an engine closed or replaced, the platform switched off, and (re-checked) every socket of an
 * integration or member that changed. Widget tokens are also re-checked when they expire: the
 * client is told to reconnect with a fresh token (a retry reason), never left on a dead one.
 * Each node acts on its own sockets; the bus tells every node. Endings lost in a Redis outage are
 * caught up with the rest of what it lost (catch-up.ts).
 */
import type { Server, Socket } from 'socket.io';
import { ERROR_CATALOGUE, isRefusal } from '../shared/errors.js';
import type { SocketEnd } from '../shared/events.js';
import type { Timer } from '../api/clock.js';
import type { Services } from '../api/services.js';
import { end, endWithError } from './connections.js';
import { reauthenticate, type SocketData } from './handshake.js';
import type { LocalSockets } from './local-sockets.js';

function endAll(sockets: Iterable<Socket>, reason: SocketEnd): void {
  for (const socket of sockets) end(socket, reason);
}

/** How many sockets are re-checked at once: after a Redis outage every socket here is. */
const RECHECK_BATCH = 100;

/**
 * Re-checks each of these sockets; those refused are ended with the refusal's code. A store that
 * cannot answer ends nothing: the socket's next command checks again, and ending every socket of a
 * node on a struggling store would only send them all back to it at once.
 */
export async function recheck(services: Services, sockets: Socket[]): Promise<{ unanswered: number }> {
  let unanswered = 0;
  for (let start = 0; start < sockets.length; start += RECHECK_BATCH) {
    await Promise.all(
      sockets.slice(start, start + RECHECK_BATCH).map(async (socket) => {
        if (socket.disconnected) return;
        try {
          await reauthenticate(services, socket.data as SocketData);
        } catch (error) {
          if (isRefusal(error)) endWithError(socket, error);
          else unanswered += 1;
        }
      }),
    );
  }
  return { unanswered };
}

export function watchEndings(services: Services, io: Server, local: LocalSockets): () => void {
  const recheckAll = (sockets: Socket[]) => void recheck(services, sockets).catch(() => {});
  return services.bus.subscribe((message) => {
    switch (message.type) {
      case 'session':
        // A refresh keeps the old token alive for a grace period; its sockets move on by themselves.
        if (message.reason !== 'refreshed') {
          endAll(local.get(`session:${message.sessionId}`), { code: 'unauthorized', final: true, message: `The widget session ended (${message.reason}).` });
        }
        return;
      case 'engine':
        if (message.reason === 'closed') {
          endAll(local.get(`engine:${message.engineId}`), { code: 'replaced', final: true, message: 'This call window was closed or replaced by a newer one.' });
        }
        return;
      case 'platform':
        if (message.disabled) endAll([...io.of('/').sockets.values()], { code: 'platform_disabled', final: true, message: ERROR_CATALOGUE.platform_disabled.message });
        return;
      case 'integration':
        recheckAll(local.get(`integration:${message.integrationId}`));
        return;
      case 'member':
        recheckAll(local.get(`member:${message.memberId}`));
        return;
    }
  });
}

/**
 * Ends each widget socket when its token expires, so the client reconnects with a refreshed one.
 * The node's one disconnect listener forgets the socket (server.ts).
 */
export class TokenExpiry {
  readonly #timers = new Map<Socket, Timer>();

  constructor(private readonly services: Services) {}

  watch(socket: Socket): void {
    const data = socket.data as SocketData;
    if (data.kind !== 'widget') return;
    const { clock } = this.services;
    const timer = clock.after(Math.max(0, data.expiresAt - clock.now()), () => {
      this.#timers.delete(socket);
      end(socket, { code: 'token_expired', final: false, message: 'The widget token expired; reconnect with a refreshed token.' });
    });
    this.#timers.set(socket, timer);
  }

  forget(socket: Socket): void {
    this.#timers.get(socket)?.cancel();
    this.#timers.delete(socket);
  }
}
