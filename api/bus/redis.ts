/**
 * The Redis bus. Node messages: PUBLISH/SUBSCRIBE on one channel, delivered locally at once and
 * skipped when they echo back. Room events: socket.io's sharded Redis adapter (SPUBLISH /
 * SSUBSCRIBE, dynamic subscription mode), so an agent's push reaches only nodes with a socket in
 * that agent's room. Every client has an `error` listener, so losing Redis never crashes a node;
 * while it is down, publishes are dropped (the store stays the truth) and, when all its connections
 * are back, handlers on every node get `resync`.
 */
import { randomBytes } from 'node:crypto';
import { createShardedAdapter } from '@socket.io/redis-adapter';
import type { Redis } from 'ioredis';
import { adapterSubscriber, connectedRedis, handledRejections, redisClient, writeTogether } from '../redis.js';
import { steadyClock, systemClock, type Clock, type Timer } from '../clock.js';
import { coalesce } from '../store/coalesce.js';
import { clusterAdapter } from './cluster-adapter.js';
import { closeIo, createSocketServer } from './socket-server.js';
import { staysOnNode, type Bus, type BusHandler, type BusMessage, type BusState } from './bus.js';

/** The bus channel of a deployment on Redis database 0 (busChannels). */
export const BUS_CHANNEL = 'c2c:bus';

/**
 * The channels of the deployment on this Redis database. Pub/sub ignores the database number: two
 * deployments on one Redis server, on databases 0 and 1 (production and staging, say), would hear
 * each other's messages (a platform switch, a session's ending, every push). A database other than
 * 0 has channels of its own; database 0 keeps the plain names. (An upgrade changes the names of a
 * deployment already on another database: its nodes hear each other once all run this version.)
 */
export function busChannels(url: string): { bus: string; adapterPrefix: string } {
  const parsed = new URL(url);
  // as ioredis reads it: the path (redis://host:6379/2), else the db parameter (?db=2)
  const db = Number.parseInt(parsed.pathname.slice(1) || (parsed.searchParams.get('db') ?? ''), 10);
  if (!db) return { bus: BUS_CHANNEL, adapterPrefix: 'c2c' };
  return { bus: `c2c-db${db}:bus`, adapterPrefix: `c2c-db${db}` };
}

/**
 * The longest a snapshot waits for Redis to confirm its socket's room: a Redis that stalls without
 * dropping the connection must not hold up every snapshot (the socket then gets one that may miss a
 * change made in the meantime, as before the wait existed).
 */
export const ROOMS_JOINED_WITHIN_MS = 2000;

/** The longest a node's start waits for its socket adapter's first subscription (as connectedRedis waits for a connection). */
const SUBSCRIPTIONS_HELD_WITHIN_MS = 5000;

const noop = () => {};

/** Waits for `promise` to settle, at most `ms` (real time: a node's start); what it rejects with is dropped. */
function settledWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    promise.then(noop, noop).finally(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

interface Envelope {
  node: string;
  message: BusMessage;
}

/**
 * `clock` is the service's; `probeClock` the one its connections' liveness probes run on
 * (api/redis-liveness.ts): real time unless a test drives it.
 */
export async function createRedisBus(url: string, clock: Clock = systemClock, probeClock: Clock = steadyClock): Promise<Bus> {
  const node = randomBytes(8).toString('hex');
  const channels = busChannels(url);
  const pub = await connectedRedis(url, 'c2c-bus-pub', { clock: probeClock });
  // The subscribers queue their SUBSCRIBE until connected; ioredis resubscribes after a reconnect.
  // ioredis re-sends SUBSCRIBE after a reconnect and drops the promise: a Redis that flaps right
  // then would otherwise reject it unhandled (handledRejections); the SUBSCRIBE below still sees its own.
  const sub = handledRejections(redisClient(url, 'c2c-bus-sub', { queueWhileOffline: true, clock: probeClock }));
  // The pushes a node makes in one turn of the event loop (the commands of one shared statement, say) leave in one write.
  const adapterPub = writeTogether(await connectedRedis(url, 'c2c-adapter-pub', { clock: probeClock }).catch((error: unknown) => {
    // A start that fails leaves no connection open (nor its liveness probe's timer): an embedder that
    // goes on, a test or the CLI, is not held by them. (The process exits on it otherwise.)
    for (const client of [pub, sub]) client.disconnect();
    throw error;
  }));
  const adapterSub = adapterSubscriber(url, probeClock);
  let relayed = 0;
  const io = createSocketServer({
    adapter: clusterAdapter(createShardedAdapter(adapterPub, adapterSub, { subscriptionMode: 'dynamic', channelPrefix: channels.adapterPrefix }), () => void (relayed += 1)),
  });
  // Making the server made its namespace's adapter, which sent SSUBSCRIBE for the namespace's
  // channel (what other nodes broadcast to several rooms at once) and does not wait for it: the
  // command waits in the subscriber's queue until it connects. A node starts once Redis has taken
  // it (the answer to a PING sent after it), as it starts once its bus subscription holds: before,
  // what another node broadcast in this node's first moments was lost to it.
  await settledWithin(adapterSub.ping(), SUBSCRIPTIONS_HELD_WITHIN_MS);

  // Joining a room new to this node sends SSUBSCRIBE and does not wait for it. Redis answers one
  // connection's commands in order, so the answer to a PING sent after them says they are in
  // effect; the joins that come together (a reconnect storm's) share a PING.
  // Then a PING on the bus's subscriber: a change published before the rooms took effect (whose
  // push this node therefore missed) has its bus message here before the answer, so the cached
  // state it makes stale is dropped before the snapshot reads it (widget-states.ts).
  const confirmJoins = coalesce(
    async (waiting: null[]) => {
      await adapterSub.ping().then(noop, noop);
      await sub.ping().then(noop, noop);
      return waiting;
    },
    { max: Infinity },
  );
  const roomsJoined = () =>
    new Promise<void>((resolve) => {
      const stalled: Timer = clock.after(ROOMS_JOINED_WITHIN_MS, resolve);
      void confirmJoins(null).then(() => {
        stalled.cancel();
        resolve();
      });
    });

  const handlers = new Set<BusHandler>();
  let subscribed = false;
  let everSubscribed = false;
  const deliver = (message: BusMessage, local: boolean) => {
    for (const handler of [...handlers]) handler(message, { local });
  };

  sub.on('message', (_channel: string, text: string) => {
    let envelope: Partial<Envelope> | null;
    try {
      envelope = JSON.parse(text) as Partial<Envelope> | null;
    } catch {
      return;
    }
    // anything else on the channel (another version, a stray PUBLISH) is ignored, never thrown
    // inside ioredis's listener
    if (typeof envelope?.node !== 'string' || typeof envelope.message?.type !== 'string') return;
    if (envelope.node !== node) deliver(envelope.message, false);
  });
  // A subscriber's 'ready' comes before Redis has taken its subscriptions back: ioredis sends them
  // again as it turns ready, without waiting for the answer. A message published in between would
  // be lost while this node took itself for up (and resynced: its caches emptied, then filled again
  // from the store, to hear of no later change). Only once Redis answered after them (Redis answers
  // in order) is the subscriber counted back.
  let adapterSubscribed = true;
  const whenSubscriptionsHold = (subscriber: Redis, back: () => void) => {
    subscriber.on('ready', () => {
      subscriber.ping().then(() => {
        back();
        recovered();
      }, () => {}); // closed again: its next 'ready' tries again
    });
  };
  sub.on('close', () => void (subscribed = false));
  adapterSub.on('close', () => void (adapterSubscribed = false));
  // The bus's subscriber subscribes again itself, and is counted back on Redis's answer: ioredis
  // renews only the subscriptions Redis confirmed on the connection before, so a re-SUBSCRIBE lost
  // with that connection, and given up after a failed reconnect, would never be sent again, while a
  // PING would still be answered: the node would count itself up and hear no other node. (A
  // subscription already renewed is not doubled: Redis holds a channel once per connection.)
  sub.on('ready', () => {
    sub.subscribe(channels.bus).then(() => {
      subscribed ||= everSubscribed;
      recovered();
    }, () => {}); // closed again: its next 'ready' tries again
  });
  // The adapter's subscriber keeps its queue however many reconnects fail (redis.ts, keepQueued).
  whenSubscriptionsHold(adapterSub, () => void (adapterSubscribed = true));
  const closeAll = () => {
    closeIo(io);
    for (const client of [sub, pub, adapterSub, adapterPub]) client.disconnect();
  };
  try {
    await sub.subscribe(channels.bus);
  } catch (error) {
    closeAll();
    throw error;
  }
  subscribed = true;
  everSubscribed = true;
  const state = (): BusState =>
    subscribed && adapterSubscribed && pub.status === 'ready' && adapterPub.status === 'ready' && adapterSub.status === 'ready' ? 'up' : 'down';

  // Any of the four connections can drop on its own (a network blip, Redis closing a subscriber
  // whose output buffer overflowed). While one was down, messages and pushes may have been lost:
  // to this node (its caches and sockets) and from it (other nodes' caches and sockets). So once
  // all are back, this node and every other one hear `resync`.
  let lost = false;
  let closed = false;
  const recovered = () => {
    if (!lost || closed || state() !== 'up') return;
    lost = false;
    deliver({ type: 'resync' }, true);
    pub.publish(channels.bus, JSON.stringify({ node, message: { type: 'resync' } } satisfies Envelope)).catch(() => {});
  };
  for (const client of [sub, pub, adapterPub, adapterSub]) client.on('close', () => void (lost = true));
  // (the subscribers call it once their subscriptions hold, above)
  for (const publisher of [pub, adapterPub]) publisher.on('ready', recovered);

  return {
    driver: 'redis',
    io,
    publish(message) {
      deliver(message, true);
      if (pub.status !== 'ready' || staysOnNode(message)) return;
      pub.publish(channels.bus, JSON.stringify({ node, message } satisfies Envelope)).catch(() => {});
    },
    subscribe(handler) {
      handlers.add(handler);
      return () => handlers.delete(handler);
    },
    resyncHere: () => deliver({ type: 'resync' }, true),
    // Other nodes may hold the room; only Redis knows, and asking costs more than publishing. While
    // Redis is down only this node's own sockets can be reached: a command for a window elsewhere
    // then stays queued for its heartbeat rather than counting as pushed.
    mayHaveListeners(room) {
      return state() === 'up' || io.sockets.adapter.rooms.has(room);
    },
    roomsJoined: () => (state() === 'up' ? roomsJoined() : Promise.resolve()),
    relayedCount: () => relayed,
    state,
    async close() {
      closed = true;
      handlers.clear();
      closeAll();
    },
  };
}
