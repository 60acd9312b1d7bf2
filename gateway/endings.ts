/**
 * Ending connections the moment their credential stops being good: a widget session that ended,
 * an engine closed or replaced (or its token, by its pairing asked again), the platform switched off, and (re-checked) every socket of an
 * integration or member that changed, and a widget session refreshed away (its old token lives on
 * for a grace period). A widget socket whose token expires is ended too: the client is told to
 * reconnect with a fresh token (a retry reason), never left on a dead one.
 * Each node acts on its own sockets; the bus tells every node. Endings lost in a Redis outage are
 * caught up with the rest of what it lost (catch-up.ts).
 */
import type { Server, Socket } from 'socket.io';
import { ERROR_CATALOGUE, isRefusal } from '../shared/errors.js';
import type { SocketEnd } from '../shared/events.js';
import type { Timer } from '../api/clock.js';
import type { Services } from '../api/services.js';
import { end, endWithError, TOKEN_EXPIRED } from './connections.js';
import { reauthenticate, type SocketData } from './handshake.js';
import type { LocalSockets } from './local-sockets.js';

/** A closed engine's sockets are told why: replaced by a newer window, or closed (by the window, or with its integration). */
function engineClosedEnd(why: string | undefined): SocketEnd {
  if (why === 'replaced' || why === undefined) return { code: 'replaced', final: true, message: 'This call window was replaced by a newer one.' };
  return { code: 'unauthorized', final: true, message: `This call window was closed (${why}).` };
}

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
export async function recheck(services: Services, sockets: Socket[]): Promise<{ unanswered: Socket[] }> {
  const unanswered: Socket[] = [];
  for (let start = 0; start < sockets.length; start += RECHECK_BATCH) {
    await Promise.all(
      sockets.slice(start, start + RECHECK_BATCH).map(async (socket) => {
        if (socket.disconnected) return;
        try {
          await reauthenticate(services, socket.data as SocketData);
        } catch (error) {
          // A token found expired (its expiry moved forward unheard, by a refresh in an outage) ends as the sweep would end it.
          if (isRefusal(error)) endWithError(socket, error);
          else unanswered.push(socket);
        }
      }),
    );
  }
  return { unanswered };
}

/**
 * The sockets a re-check could not judge (the store did not answer) are checked again, up to 1 s
 * later, the wait doubling up to 30 s (each halved at most, at random: every node heard the same
 * message at once), up to RECHECK_RETRY.attempts checks in all: an integration suspended or a
 * member disabled while the store was slow would otherwise keep its sockets connected, in their
 * rooms and pushed to, until the token expired. (A command on one is refused, and ends it.)
 */
export const RECHECK_RETRY = { firstMs: 1000, maxMs: 30_000, attempts: 8 } as const;

export function watchEndings(services: Services, io: Server, local: LocalSockets): () => void {
  const retries = new Set<Timer>();
  const recheckAll = (sockets: Socket[], attempt = 0): void =>
    void recheck(services, sockets)
      .then(({ unanswered }) => {
        const left = unanswered.filter((socket) => socket.connected);
        if (left.length === 0 || attempt + 1 >= RECHECK_RETRY.attempts) return;
        const wait = Math.min(RECHECK_RETRY.firstMs * 2 ** attempt, RECHECK_RETRY.maxMs);
        const timer = services.clock.after(wait / 2 + Math.random() * (wait / 2), () => {
          retries.delete(timer);
          recheckAll(left, attempt + 1);
        });
        retries.add(timer);
      })
      .catch(() => {});
  const unsubscribe = services.bus.subscribe((message) => {
    switch (message.type) {
      case 'session':
        // A refresh keeps the old token alive for a grace period: its sockets learn when that ends
        // (the re-check reads it) and are ended then (endExpiredTokens), if their clients have not
        // moved to the new token by themselves.
        if (message.reason === 'refreshed') recheckAll(local.get(`session:${message.sessionId}`));
        else endAll(local.get(`session:${message.sessionId}`), { code: 'unauthorized', final: true, message: `The widget session ended (${message.reason}).` });
        return;
      case 'engine':
        if (message.reason === 'closed') endAll(local.get(`engine:${message.engineId}`), engineClosedEnd(message.why));
        // the sockets of the old token fail their re-check; the new token's pass
        else if (message.reason === 'retokened') recheckAll(local.get(`engine:${message.engineId}`));
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
  return () => {
    unsubscribe();
    for (const timer of retries) timer.cancel();
    retries.clear();
  };
}

/** How often a node looks for widget sockets whose token has expired: each is ended at most this late. */
export const EXPIRY_SWEEP_MS = 1000;

/**
 * Ends each widget socket once its token has expired, so the client reconnects with a refreshed
 * one. A sweep of the node's sockets every EXPIRY_SWEEP_MS reads each widget's expiry from its
 * data, which every re-check of its credential keeps current (a refresh shortens the old token's
 * life to a grace period: reauthenticate). A timer for each socket would weigh some 300 bytes per
 * socket and need re-arming whenever an expiry moved; the sweep costs a comparison per socket.
 */
export function endExpiredTokens(services: Services, io: Server): () => void {
  const { clock } = services;
  let timer: Timer;
  const sweep = () => {
    timer = clock.after(EXPIRY_SWEEP_MS, sweep);
    const now = clock.now();
    for (const socket of io.of('/').sockets.values()) {
      const data = socket.data as SocketData;
      if (data.kind === 'widget' && data.expiresAt <= now) {
        end(socket, TOKEN_EXPIRED);
      }
    }
  };
  timer = clock.after(EXPIRY_SWEEP_MS, sweep);
  return () => timer.cancel();
}
