/**
 * Redis connections for the bus, the rate counters and the socket adapter. Every client has an
 * `error` listener (losing Redis must never crash a node), reconnects on its own with a capped
 * backoff, and closes its connection when Redis stops answering without closing it
 * (redis-liveness.ts). Command clients fail fast instead of queueing while disconnected; subscriber clients
 * (`queueWhileOffline`) queue. ioredis drops its queue after a few failed reconnects, which is right
 * for the bus's subscriber (a node does not start without Redis, and it subscribes again itself
 * each time it reconnects: bus/redis.ts), but not for the socket adapter's subscriber (`keepQueued`): ioredis renews after a reconnect only the
 * subscriptions Redis confirmed, so a dropped SSUBSCRIBE — a room a socket joined during an
 * outage — would never be made, and that room would get no pushes. No auto-pipelining: its batch
 * promise rejects unhandled when a client disconnects with commands queued.
 */
import { Redis } from 'ioredis';
import { steadyClock, type Clock } from './clock.js';
import { closeWhenSilent } from './redis-liveness.js';

export interface ClientOptions {
  /** queue commands while disconnected (subscribers), instead of failing them at once */
  queueWhileOffline?: boolean;
  /** keep queued commands however many reconnects fail */
  keepQueued?: boolean;
  /** send again, once reconnected, the commands that were on their way when the connection dropped (default: yes) */
  resendInFlight?: boolean;
  /** the clock the liveness probe runs on (redis-liveness.ts): real time unless a test drives it */
  clock?: Clock;
}

export function redisClient(url: string, name: string, options: ClientOptions = {}): Redis {
  const client = new Redis(url, {
    connectionName: name,
    // Redis may have run a command whose answer the drop lost: resending it runs it twice.
    autoResendUnfulfilledCommands: options.resendInFlight ?? true,
    // null: queued commands wait for Redis however many reconnects fail (else dropped every 2nd)
    maxRetriesPerRequest: options.keepQueued ? null : 1,
    enableOfflineQueue: options.queueWhileOffline ?? false,
    retryStrategy: (attempt) => Math.min(100 * 2 ** attempt, 2000),
    lazyConnect: false,
  });
  client.on('error', () => {});
  const stopProbing = closeWhenSilent(client, options.clock ?? steadyClock);
  const disconnect = client.disconnect.bind(client);
  client.disconnect = (reconnect = false) => {
    if (!reconnect) stopProbing();
    disconnect(reconnect);
  };
  return client;
}

/**
 * Sends this client's commands to Redis together: the first command of a turn of the event loop
 * corks the connection and the turn's end uncorks it, so the turn's commands leave in one write.
 * For the socket adapter's subscriber: a reconnect storm joins thousands of rooms, one SSUBSCRIBE
 * each, and a system call per SSUBSCRIBE was about 8 % of a restarting gateway's CPU. A
 * subscription that leaves at the end of the turn is not late: its socket's snapshot is read once
 * Redis has confirmed it (Bus.roomsJoined).
 */
export function writeTogether(client: Redis): Redis {
  const send = client.sendCommand.bind(client);
  let corked = false;
  client.sendCommand = (command, stream) => {
    const socket = client.stream;
    if (!corked && socket?.writable) {
      corked = true;
      socket.cork();
      setImmediate(() => {
        corked = false;
        socket.uncork();
      });
    }
    return send(command, stream);
  };
  return client;
}

/**
 * Marks every command promise of this client as handled, for callers that never await them: the
 * socket adapter sends SSUBSCRIBE and SUNSUBSCRIBE and drops the promise, so a command failing
 * (queued when the client closes, say) would be an unhandled rejection, which stops a Node
 * process. Callers that do await a command still see its rejection.
 */
export function handledRejections(client: Redis): Redis {
  const send = client.sendCommand.bind(client);
  client.sendCommand = (command, stream) => {
    const result = send(command, stream);
    if (result instanceof Promise) result.catch(() => {});
    return result;
  };
  return client;
}

/** What ioredis keeps of a command queued while disconnected (its offline queue, a denque). */
interface OfflineItem {
  command: { name: string; args: unknown[]; reject(error: Error): void; resolve(value: unknown): void };
}
interface OfflineQueue {
  length: number;
  peekAt(index: number): OfflineItem | undefined;
  removeOne(index: number): unknown;
}

const OPPOSITE: Readonly<Record<string, string>> = { ssubscribe: 'sunsubscribe', sunsubscribe: 'ssubscribe' };

/**
 * Keeps at most one queued subscription command per channel while Redis is away: a room joined
 * then left during an outage (a page loaded and closed) cancels out rather than queue two
 * commands, about 1.4 KB each, until Redis returns. Without this a node serving through an outage
 * of hours grew without bound, with every page load, and could run out of memory; now the queue
 * holds what differs from Redis's last view, one command per room. The pair is taken out of
 * ioredis's offline queue (internal to ioredis 5; checked by test/infra/redis-outage.test.ts):
 * each command's promise is settled, as Redis would have answered.
 */
export function compactOfflineSubscriptions(client: Redis): Redis {
  const send = client.sendCommand.bind(client);
  client.sendCommand = (command, stream) => {
    const opposite = OPPOSITE[command.name];
    const queue = (client as unknown as { offlineQueue?: OfflineQueue }).offlineQueue;
    if (opposite && client.status !== 'ready' && queue && command.args.length === 1) {
      const channel = String(command.args[0]);
      for (let i = queue.length - 1; i >= 0; i -= 1) {
        const queued = queue.peekAt(i)?.command;
        if (queued?.name === command.name && queued.args.length === 1 && String(queued.args[0]) === channel) break;
        if (queued?.name === opposite && queued.args.length === 1 && String(queued.args[0]) === channel) {
          queue.removeOne(i);
          queued.resolve(1);
          command.resolve(1);
          return command.promise;
        }
      }
    }
    return send(command, stream);
  };
  return client;
}

/** The socket adapter's subscriber: it keeps room subscriptions queued through outages (one per room), writes them together, and never awaits them. */
export function adapterSubscriber(url: string, clock?: Clock): Redis {
  return handledRejections(compactOfflineSubscriptions(writeTogether(redisClient(url, 'c2c-adapter-sub', { queueWhileOffline: true, keepQueued: true, clock }))));
}

/**
 * Resolves once Redis at url answers, or rejects after timeoutMs with why it does not (the last
 * connection error): a node does not start without its Redis, and says so in one line (serve.ts)
 * rather than failing later inside a driver. Redis starting alongside (a compose file) has the
 * timeout to come up.
 */
export async function reachRedis(url: string, timeoutMs = 5000): Promise<void> {
  const client = new Redis(url, {
    connectionName: 'c2c-start',
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(100 * 2 ** attempt, 1000),
  });
  let lastError: Error | undefined;
  client.on('error', (error: Error) => void (lastError = error));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(lastError ?? new Error(`no answer within ${timeoutMs / 1000} s`)), timeoutMs);
      client.once('ready', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  } finally {
    client.disconnect();
  }
}

/**
 * Rejects unless the Redis at url has sharded pub/sub (SPUBLISH, SSUBSCRIBE: Redis 7 and later),
 * which the socket adapter sends every push between nodes on. Without it the adapter's commands
 * fail unheard (it never awaits them) while the bus itself works: a node would report push up and
 * reach no socket on another node.
 */
export async function requireShardedPubSub(url: string): Promise<void> {
  const client = new Redis(url, { connectionName: 'c2c-start', maxRetriesPerRequest: 1, retryStrategy: () => null });
  client.on('error', () => {});
  try {
    await client.call('SPUBLISH', 'c2c:start:probe', '');
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new Error(`it has no sharded pub/sub (SPUBLISH answered "${why}"): the gateway needs Redis 7 or later`, { cause: error });
  } finally {
    client.disconnect();
  }
}

/** A client that is connected, or after timeoutMs one that keeps trying in the background. */
export async function connectedRedis(url: string, name: string, options: ClientOptions = {}, timeoutMs = 5000): Promise<Redis> {
  const client = redisClient(url, name, options);
  if (client.status === 'ready') return client;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, timeoutMs);
    client.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  return client;
}
