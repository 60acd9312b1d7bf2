/**
 * A gateway cut off from both Redis and the store (a network partition around its host, say) can
 * neither hear other nodes' pushes nor read what its catch-up would send in their place
 * (catch-up.ts). Its sockets would stay connected and silent; their clients, which poll only
 * while their socket is down (and check once a minute: the SDK's live check), would show an old
 * state, a hung-up call as connected, and send it commands it can only refuse. Once that has
 * lasted ISOLATED_FOR_MS, the node ends every socket with a retry reason: the clients poll and
 * heartbeat over REST, which a load balancer sends to nodes that can answer (this one's /healthz
 * says 503 meanwhile), and reconnect after `retry_after`, to a node that can serve them. Cut off
 * from only one of the two, the node still serves its sockets (pushes come through Redis, or the
 * catch-up reads the store) and keeps them; and a store that is only slow (a statement timeout)
 * is no partition.
 */
import type { Server } from 'socket.io';
import { LIMITS } from '../shared/limits.js';
import type { SocketEnd } from '../shared/events.js';
import type { Timer } from '../api/clock.js';
import type { Services } from '../api/services.js';
import { isStoreOutOfReach } from '../api/store/db.js';
import { end } from './connections.js';

/** How long a node stays cut off from both before it lets its sockets go: a blip of either is ridden out. */
export const ISOLATED_FOR_MS = 15_000;

/** What the sockets of an isolated node are told: reconnect, after a wait spread by each client. */
export const ISOLATED: SocketEnd = {
  code: 'service_unavailable',
  final: false,
  message: 'This node cannot reach the database or the other nodes; reconnect (another node will answer).',
  retry_after: 5,
};

/** Starts watching for isolation, every poll_ms while the bus is down; returns what stops it. */
export function shedWhenIsolated(services: Services, io: Server): () => void {
  const { bus, clock, db } = services;
  /** when the store was first found out of reach with the bus down, in this isolation */
  let since: number | null = null;
  let probing = false;
  let stopped = false;
  let timer: Timer;

  async function probe(): Promise<void> {
    if (bus.state() !== 'down') {
      since = null;
      return;
    }
    if (probing) return; // a probe that waits on an unreachable store spans several ticks
    probing = true;
    const at = clock.now();
    try {
      await db.query('SELECT 1');
      since = null;
    } catch (error) {
      if (!isStoreOutOfReach(error) || bus.state() !== 'down') {
        since = null;
        return;
      }
      since ??= at;
      const sockets = [...io.of('/').sockets.values()];
      if (stopped || clock.now() - since < ISOLATED_FOR_MS || sockets.length === 0) return;
      services.log?.(`cut off from Redis and the database for ${Math.round((clock.now() - since) / 1000)} s: ending this node's ${sockets.length} sockets, whose clients poll meanwhile and reconnect to a node that can serve them`);
      services.metrics.isolatedEndings.inc(sockets.length);
      for (const socket of sockets) end(socket, ISOLATED);
    } finally {
      probing = false;
    }
  }

  const tick = (): void => {
    timer = clock.after(LIMITS.pollMs, () => {
      if (stopped) return;
      tick();
      return probe();
    });
  };
  tick();
  return () => {
    stopped = true;
    timer.cancel();
  };
}
