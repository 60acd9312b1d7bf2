/**
 * Keeps this node's sockets current while the bus cannot carry what other nodes send them. While
 * Redis is down, a change made on another node (a call answered, a command for a window here, a
 * revoked session) reaches no socket on this one, and the REST contract does not step in: a client
 * polls only while its socket is down (and checks once a minute while it is up), and an idle window
 * heartbeats every 15 s. So every poll_ms of an outage, and once more when the bus is back (for
 * what was lost before the subscriptions returned), the gateway does for its sockets what their
 * polls and heartbeats would: it re-checks each credential (ending those refused), and sends each
 * agent's WidgetState and each window's work, read from the store. What sockets hold is not known
 * here, so the first catch-up of an outage sends every widget its state; later ones only a newer
 * version. A window is handed what a heartbeat would hand it, and after the outage all it has not
 * acked; it carries out each command once however often it arrives. A catch-up whose reads did not
 * all succeed is made again, for what failed only (otherwise the store would be read for every
 * socket of the node every poll_ms, for as long as one read kept failing). A node that cannot reach
 * the store either lets its sockets go after a while (isolation.ts).
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

/** What a catch-up could not do, by socket id (credentials to re-check, windows' work) and agent room (widget states). */
export interface Left {
  rechecks: Set<string>;
  rooms: Set<string>;
  engines: Set<string>;
}

/** What a catch-up covers: every socket, or what one before could not do. */
export type Scope = 'all' | Left;

const nothingLeft = (): Left => ({ rechecks: new Set(), rooms: new Set(), engines: new Set() });
const isEmpty = (left: Left) => left.rechecks.size === 0 && left.rooms.size === 0 && left.engines.size === 0;

/** What is still to do after a catch-up covering `covering` left `result`, of what was left before it. */
export function carry(before: Scope, covering: Scope, result: Scope): Scope {
  if (covering === 'all') return result;
  if (before === 'all') return 'all';
  const outside = (was: Set<string>, done: Set<string>) => new Set([...was].filter((key) => !done.has(key)));
  return widen({ rechecks: outside(before.rechecks, covering.rechecks), rooms: outside(before.rooms, covering.rooms), engines: outside(before.engines, covering.engines) }, result);
}

/** What either scope covers: everything if either does. */
function widen(a: Scope | undefined, b: Scope): Scope {
  if (a === undefined) return b;
  if (a === 'all' || b === 'all') return 'all';
  return { rechecks: new Set([...a.rechecks, ...b.rechecks]), rooms: new Set([...a.rooms, ...b.rooms]), engines: new Set([...a.engines, ...b.engines]) };
}

/** Starts keeping this node's sockets current through bus outages; returns what stops it (once a catch-up under way is done). */
export function keepCurrentThroughOutages(services: Services, io: Server): () => Promise<void> {
  const { bus, clock, pusher } = services;
  /** per agent room, the version the catch-ups of this outage sent its widgets */
  const sent = new Map<string, number>();
  /** what may have been lost since the last catch-up made with the bus up: everything, what that one could not do, or nothing */
  let missed: Scope | null = null;
  let running: Promise<Scope> | undefined;
  /** what the next catch-up hands windows over; `unacked` (the final one's) wins over `due` */
  let next: WorkToSend | undefined;
  /** what the next catch-up covers */
  let nextScope: Scope | undefined;
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

  /** Resolves what it could not do because a read failed (a store that cannot answer): that is then done again. */
  async function catchUp(work: WorkToSend, scope: Scope): Promise<Left> {
    const left = nothingLeft();
    // What is pushed from here on reaches the rooms again, so what is read after this is not lost.
    await bus.roomsJoined();
    const all = [...io.of('/').sockets.values()];
    const rechecked = await recheck(services, scope === 'all' ? all : all.filter((socket) => scope.rechecks.has(socket.id)));
    for (const socket of rechecked.unanswered) left.rechecks.add(socket.id);
    if (stopped) return left;
    const widgets = new Map<string, { data: WidgetSocketData; sockets: Socket[] }>();
    const engines: Socket[] = [];
    for (const socket of io.of('/').sockets.values()) {
      const data = socket.data as SocketData;
      if (data.kind === 'engine') {
        if (scope === 'all' || scope.engines.has(socket.id)) engines.push(socket);
        continue;
      }
      const room = rooms.agent(data.integrationId, data.memberId);
      if (scope !== 'all' && !scope.rooms.has(room)) continue;
      const agent = widgets.get(room);
      if (agent) agent.sockets.push(socket);
      else widgets.set(room, { data, sockets: [socket] });
    }
    if (stopped) return left;
    let failure: unknown;
    const noteIn = (target: Set<string>, key: string) => (error: unknown) => {
      failure ??= error;
      target.add(key);
    };
    await Promise.all([
      ...[...widgets].map(([room, { data, sockets }]) => sendState(room, data, sockets).catch(noteIn(left.rooms, room))),
      ...engines.map((socket) => sendWork(socket, work).catch(noteIn(left.engines, socket.id))),
    ]);
    if (failure !== undefined) services.log?.('catch-up after a bus outage failed', failure);
    return left;
  }

  /**
   * One catch-up at a time; one asked for meanwhile runs after it (it may have read too early),
   * covering what both were asked to. Resolves what the last one made could not do.
   */
  function run(work: WorkToSend, scope: Scope): Promise<Scope> {
    next = next === 'unacked' ? next : work;
    nextScope = widen(nextScope, scope);
    if (running) return running;
    const drain = async () => {
      let left: Scope = nothingLeft();
      while (next && nextScope && !stopped) {
        const [current, covering] = [next, nextScope];
        next = nextScope = undefined;
        const result = await catchUp(current, covering).catch((error: unknown): Scope => {
          services.log?.('catch-up after a bus outage failed', error);
          return covering; // all of it, as it was asked
        });
        // what an earlier pass of this drain left and this one did not cover is still to do
        left = carry(left, covering, result);
      }
      running = undefined;
      return left;
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
    if (!down && missed === null && !now) return;
    // While the bus is down, and once it has just come back, anything may have been lost.
    const left = await run(down ? 'due' : 'unacked', down || now ? 'all' : (missed ?? 'all'));
    missed = down || bus.state() === 'down' ? 'all' : left !== 'all' && isEmpty(left) ? null : left;
    // Nothing can be lost any more: the next outage starts afresh.
    if (missed === null) sent.clear();
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
