/**
 * Keeps this node's sockets current while the bus cannot carry what other nodes send them. While
 * Redis is down, a change made on another node (a call answered, a command for a window here, a
 * revoked session) reaches no socket on this one, and the REST contract does not step in: a client
 * polls only while its socket is down, and an idle window heartbeats every 15 s. So every poll_ms of
 * an outage, and once more when the bus is back (for what was lost before the subscriptions
 * returned), the gateway does for its sockets what their polls and heartbeats would: it re-checks
 * each credential (ending those refused), and sends each agent's WidgetState and each window's
 * work, read from the store. What sockets hold is not known here, so the first catch-up of an
 * outage sends every widget its state; later ones only a newer version. A window is handed what a
 * heartbeat would hand it, and after the outage all it has not acked; it carries out each command
 * once however often it arrives.
 */
import type { Server, Socket } from 'socket.io';
import { LIMITS } from '../shared/limits.js';
import type { Timer } from '../api/clock.js';
import { rooms } from '../api/domain/push.js';
import type { Services } from '../api/services.js';
import type { HandOver } from '../api/domain/engines/work.js';
import { recheck } from './endings.js';
import type { EngineSocketData, SocketData, WidgetSocketData } from './handshake.js';

type WorkToSend = Extract<HandOver, 'due' | 'unacked'>;

/** Starts keeping this node's sockets current through bus outages; returns what stops it (once a catch-up under way is done). */
export function keepCurrentThroughOutages(services: Services, io: Server): () => Promise<void> {
  const { bus, clock, pusher } = services;
  /** per agent room, the version the catch-ups of this outage sent its widgets */
  const sent = new Map<string, number>();
  /** whether something may have been lost since the last catch-up made with the bus up */
  let missed = false;
  let running: Promise<boolean> | undefined;
  /** what the next catch-up hands windows over; `unacked` (the final one's) wins over `due` */
  let next: WorkToSend | undefined;
  let timer: Timer | undefined;
  let stopped = false;

  async function sendState(room: string, data: WidgetSocketData, sockets: Socket[]): Promise<void> {
    const state = await pusher.agentState(data.integrationId, data.memberId);
    if (!state || state.version <= (sent.get(room) ?? 0)) return;
    sent.set(room, state.version);
    for (const socket of sockets) socket.emit('state', state);
  }

  async function sendWork(socket: Socket, work: WorkToSend): Promise<void> {
    const handed = await pusher.engineWork((socket.data as EngineSocketData).engineId, work);
    if (handed.commands.length > 0 || handed.dial_requests.length > 0) socket.emit('work', handed);
  }

  /** Resolves false if a read failed (a store that cannot answer): the catch-up is then made again. */
  async function catchUp(work: WorkToSend): Promise<boolean> {
    // What is pushed from here on reaches the rooms again, so what is read after this is not lost.
    await bus.roomsJoined();
    const rechecked = await recheck(services, [...io.of('/').sockets.values()]);
    if (stopped) return true;
    const widgets = new Map<string, { data: WidgetSocketData; sockets: Socket[] }>();
    const engines: Socket[] = [];
    for (const socket of io.of('/').sockets.values()) {
      const data = socket.data as SocketData;
      if (data.kind === 'engine') {
        engines.push(socket);
        continue;
      }
      const room = rooms.agent(data.integrationId, data.memberId);
      const agent = widgets.get(room);
      if (agent) agent.sockets.push(socket);
      else widgets.set(room, { data, sockets: [socket] });
    }
    if (stopped) return true;
    const outcomes = await Promise.allSettled([...[...widgets].map(([room, { data, sockets }]) => sendState(room, data, sockets)), ...engines.map((socket) => sendWork(socket, work))]);
    const failed = outcomes.find((outcome) => outcome.status === 'rejected');
    if (failed) services.log?.('catch-up after a bus outage failed', (failed as PromiseRejectedResult).reason);
    return rechecked.unanswered.length === 0 && !failed;
  }

  /**
   * One catch-up at a time; one asked for meanwhile runs after it (it may have read too early).
   * Resolves whether the last one made got every answer from the store.
   */
  function run(work: WorkToSend): Promise<boolean> {
    next = next === 'unacked' ? next : work;
    if (running) return running;
    const drain = async () => {
      let complete = true;
      while (next && !stopped) {
        const current = next;
        next = undefined;
        complete = await catchUp(current).catch((error: unknown) => {
          services.log?.('catch-up after a bus outage failed', error);
          return false;
        });
      }
      running = undefined;
      return complete;
    };
    running = drain();
    return running;
  }

  /**
   * While the bus is down, and once after it (or after a reconnect: `now`) with the bus up from
   * start to end. While it is down, windows get what a heartbeat would (`due`: a push from this
   * node is not lost, so work handed over moments ago is not sent again); the final catch-up sends
   * all they have not acked, since a push lost as the subscriptions came back is not yet due.
   */
  async function check(now = false): Promise<void> {
    const down = bus.state() === 'down';
    if (!down && !missed && !now) return;
    const complete = await run(down ? 'due' : 'unacked');
    missed = down || bus.state() === 'down' || !complete;
    // Nothing can be lost any more: the next outage starts afresh.
    if (!missed) sent.clear();
  }

  // The next tick is set before this one's catch-up runs: a slow store delays no tick.
  function tick(): void {
    timer = clock.after(LIMITS.pollMs, () => {
      if (stopped) return;
      tick();
      return check();
    });
  }

  // The bus reconnected: anything may have been lost, however short the outage.
  const unsubscribe = bus.subscribe((message) => {
    if (message.type === 'resync') void check(true);
  });
  tick();

  // A stop waits for a catch-up under way at most this long: its sockets are being ended, and a
  // catch-up on a struggling store (a statement timeout is 10 s) would hold the stop past its
  // bound. What it still does after is refused by the closed store, and caught.
  return async () => {
    stopped = true;
    timer?.cancel();
    unsubscribe();
    let waited: Timer | undefined;
    await Promise.race([running, new Promise<void>((resolve) => (waited = clock.after(CATCH_UP_STOP_WAIT_MS, resolve)))]);
    waited?.cancel();
  };
}

/** How long a stopping node waits for a catch-up under way (see the stop above). */
export const CATCH_UP_STOP_WAIT_MS = 1000;
