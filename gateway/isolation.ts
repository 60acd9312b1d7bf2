/**
 * A gateway cut off from both Redis and the database (a network partition around its host, say)
 * can neither hear other nodes' pushes nor read what its catch-up would send in their place
 * (catch-up.ts). Its sockets would stay connected and silent; their clients, which poll only
 * while their socket is down (and check once a minute: the SDK's live check), would show an old
 * state, a hung-up call as connected, and send it commands it can only refuse. So, every poll_ms
 * while the bus is down, the node asks whether the database's server answers at all, on a
 * connection of its own (Db.reachable: a pool a busy node exhausted, or a server refusing
 * connections, still answers, and a node that sheds its sockets for that would only pile their
 * polls onto a struggling store). Once nothing has answered for ISOLATED_FOR_MS, over
 * ISOLATED_AFTER_PROBES probes in a row (a clock that jumps cannot fake them), the node ends every
 * socket with a retry reason, and refuses handshakes the same way without reading anything, until
 * a probe is answered or the bus is back. The clients poll and heartbeat over REST meanwhile, and
 * reconnect after `retry_after`: behind a load balancer that checks /healthz (503 here meanwhile),
 * to another node; behind one that does not, to this one once it can serve them. Cut off from only
 * one of the two, the node still serves its sockets (pushes come through Redis, or the catch-up
 * reads the store) and keeps them.
 */
import type { Server } from 'socket.io';
import { LIMITS } from '../shared/limits.js';
import type { SocketEnd } from '../shared/events.js';
import type { Timer } from '../api/clock.js';
import type { Services } from '../api/services.js';
import { end } from './connections.js';

/** How long a node stays cut off from both before it lets its sockets go: a blip of either is ridden out. */
export const ISOLATED_FOR_MS = 15_000;
/** The fewest unanswered probes in a row that make an isolation, however much time they seem to span. */
export const ISOLATED_AFTER_PROBES = 3;

/** What the sockets of an isolated node are told, and its handshakes: reconnect later, after a wait each client spreads. */
export const ISOLATED: SocketEnd = {
  code: 'service_unavailable',
  final: false,
  message: 'This node cannot reach the database or the other nodes; reconnect later.',
  retry_after: 5,
};

export interface Isolation {
  /** While the node is isolated (its sockets were let go), what handshakes are refused with: ISOLATED. */
  readonly refusal: SocketEnd | undefined;
  stop(): void;
}

/** Starts watching for isolation, every poll_ms while the bus is down. */
export function watchIsolation(services: Services, io: Server): Isolation {
  const { bus, clock, db } = services;
  /** when the first of the unanswered probes in a row came back, and how many came back so */
  let since = 0;
  let unanswered = 0;
  let isolated = false;
  let probing = false;
  let stopped = false;
  let timer: Timer | undefined;

  const reset = () => {
    unanswered = 0;
    isolated = false;
  };

  async function probe(): Promise<void> {
    if (bus.state() !== 'down' || !db.reachable) return reset();
    if (probing) return; // one still waiting for its answer (it gives up within seconds)
    probing = true;
    try {
      const answered = await db.reachable();
      if (stopped) return;
      if (answered || bus.state() !== 'down') return reset();
      if (unanswered++ === 0) since = clock.now();
      if (isolated || unanswered < ISOLATED_AFTER_PROBES || clock.now() - since < ISOLATED_FOR_MS) return;
      isolated = true;
      const sockets = [...io.of('/').sockets.values()];
      services.log?.(`cut off from Redis and the database for ${Math.round((clock.now() - since) / 1000)} s: ending this node's ${sockets.length} sockets and refusing handshakes until either is back; their clients poll meanwhile`);
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
  // Without a network to lose (PGlite) there is nothing to watch.
  if (db.reachable) tick();
  return {
    get refusal() {
      return isolated && bus.state() === 'down' ? ISOLATED : undefined;
    },
    stop() {
      stopped = true;
      timer?.cancel();
    },
  };
}
