/**
 * Keeps this node's sockets current while the bus cannot carry what other nodes send them. While
 * Redis is down, a change made on another node (a call answered, a command for a window here, a
 * revoked session) reaches no socket on this one, and the REST contract does not step in: a client
 * polls only while its socket is down, and an idle window heartbeats every 15 s. So every poll_ms of
 * an outage, and once more when the bus is back (for what was lost before the subscriptions
 * returned), the gateway does for its sockets what their polls and heartbeats would: it re-checks
 * each credential (ending those that no longer pass), and sends each agent's WidgetState and each
 * window's unacked work, read from the store. A widget is sent its state only when the version is
 * newer than what the catch-ups of this outage sent it; a window's work is handed over again until
 * acked, as heartbeats do, and the window carries out each command once.
 */
import type { Server, Socket } from 'socket.io';
import { LIMITS } from '../shared/limits.js';
import type { Timer } from '../api/clock.js';
import { rooms } from '../api/domain/push.js';
import type { Services } from '../api/services.js';
import { recheck } from './endings.js';
import type { EngineSocketData, SocketData, WidgetSocketData } from './handshake.js';

/** Starts keeping this node's sockets current through bus outages; returns what stops it. */
export function keepCurrentThroughOutages(services: Services, io: Server): () => void {
  const { bus, clock, pusher } = services;
  /** per agent room, the version the catch-ups of this outage sent its widgets */
  const sent = new Map<string, number>();
  /** whether something may have been lost since the last catch-up made with the bus up */
  let missed = false;
  let running: Promise<void> | undefined;
  let again = false;
  let timer: Timer | undefined;
  let stopped = false;

  async function sendState(room: string, data: WidgetSocketData, sockets: Socket[]): Promise<void> {
    const state = await pusher.agentState(data.integrationId, data.memberId);
    if (!state || state.version <= (sent.get(room) ?? 0)) return;
    sent.set(room, state.version);
    for (const socket of sockets) socket.emit('state', state);
  }

  async function sendWork(socket: Socket): Promise<void> {
    const work = await pusher.engineWork((socket.data as EngineSocketData).engineId, 'unacked');
    if (work.commands.length > 0 || work.dial_requests.length > 0) socket.emit('work', work);
  }

  async function catchUp(): Promise<void> {
    // What is pushed from here on reaches the rooms again, so what is read after this is not lost.
    await bus.roomsJoined();
    await recheck(services, [...io.of('/').sockets.values()]);
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
    await Promise.all([...[...widgets].map(([room, { data, sockets }]) => sendState(room, data, sockets)), ...engines.map(sendWork)]);
  }

  /** One catch-up at a time; one asked for meanwhile runs again after it (it may have read too early). */
  function run(): Promise<void> {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await catchUp().catch((error: unknown) => services.log?.('catch-up after a bus outage failed', error));
      } while (again && !stopped);
      running = undefined;
    })();
    return running;
  }

  /** While the bus is down, and once after it (or a reconnect) with the bus up throughout. */
  async function check(): Promise<void> {
    const down = bus.state() === 'down';
    if (!down && !missed) return;
    await run();
    missed = down || bus.state() === 'down';
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
    if (message.type !== 'resync') return;
    missed = true;
    void run();
  });
  tick();

  return () => {
    stopped = true;
    timer?.cancel();
    unsubscribe();
  };
}
